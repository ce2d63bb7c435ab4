// RUN: step-opt %s -split-input-file --step-fuse | FileCheck %s

// A bias add, GELU and a cast after a non-fusible op (attention stands in
// for any op of role None) become one loop fusion; the bias broadcast is
// inside it, the attention is not.
// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.+]] = step.attention
// CHECK-NEXT: %[[F:.+]] = step.fusion "loop"(%arg3, %[[A]]) : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xbf16> {
// CHECK-NEXT: ^bb0(%[[B:.+]]: tensor<8xf32>, %[[X:.+]]: tensor<2x4x8xf32>):
// CHECK-NEXT: %[[BB:.+]] = step.broadcast_in_dim %[[B]], dims = [2]
// CHECK-NEXT: %[[S:.+]] = step.add %[[X]], %[[BB]]
// CHECK-NEXT: %[[G:.+]] = step.gelu %[[S]]
// CHECK-NEXT: %[[C:.+]] = step.cast %[[G]]
// CHECK-NEXT: step.yield %[[C]] : tensor<2x4x8xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @chain(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xbf16> {
  %a = step.attention %q, %k, %v : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %bb = step.broadcast_in_dim %b, dims = [2] : tensor<8xf32> -> tensor<2x4x8xf32>
  %s = step.add %a, %bb : tensor<2x4x8xf32>
  %g = step.gelu %s approximate none : tensor<2x4x8xf32>
  %c = step.cast %g : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  return %c : tensor<2x4x8xbf16>
}

// -----

// Multi-output: %s is used after the fusion, so the fusion yields it too.
// (Elementwise ops move next to their first user first: after the matmul.)
// CHECK-LABEL: func.func @multi_output
// CHECK: %[[M:.+]] = step.matmul
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "loop"(%arg0, %arg1)
// CHECK: %[[S:.+]] = step.add
// CHECK-NEXT: %[[T:.+]] = step.tanh %[[S]]
// CHECK-NEXT: step.yield %[[S]], %[[T]] : tensor<16xf32>, tensor<16xf32>
// CHECK: return %[[F]]#1, %[[M]], %[[F]]#0
func.func @multi_output(%x: tensor<16xf32>, %y: tensor<16xf32>, %m: tensor<4x4xf32>) -> (tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>) {
  %s = step.add %x, %y : tensor<16xf32>
  %t = step.tanh %s : tensor<16xf32>
  %mm = step.matmul %m, %m : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %t, %mm, %s : tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>
}

// -----

// Cost rule: an expensive op (exp) on a [8] vector read through a
// broadcast to [4x8] would be recomputed 4 times: it stays its own kernel
// and the fusion reads its result. A cheap one (neg) is recomputed inside.
// CHECK-LABEL: func.func @cost_rule
// CHECK: %[[E:.+]] = step.exp %arg1 : tensor<8xf32>
// CHECK-NEXT: step.fusion "loop"(%[[E]], %arg0, %arg2)
// CHECK-NOT: step.exp
// CHECK: step.neg %{{.+}} : tensor<8xf32>
// CHECK-NEXT: step.broadcast_in_dim
// CHECK-NEXT: step.add
// CHECK-NEXT: step.yield
func.func @cost_rule(%x: tensor<4x8xf32>, %a: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = step.exp %a : tensor<8xf32>
  %n = step.neg %c : tensor<8xf32>
  %eb = step.broadcast_in_dim %e, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %nb = step.broadcast_in_dim %n, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %s = step.mul %x, %eb : tensor<4x8xf32>
  %t = step.add %s, %nb : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// A lone elementwise op stays unfused: one kernel either way.
// CHECK-LABEL: func.func @single
// CHECK-NOT: step.fusion
// CHECK: step.exp
func.func @single(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = step.exp %x : tensor<16xf32>
  return %e : tensor<16xf32>
}

// -----

// max-ops bounds a fusion: a chain of 5 ops with max-ops=3 splits.
// RUN: step-opt %s -split-input-file --step-fuse="max-ops=3" | FileCheck %s --check-prefix=SMALL
// SMALL-LABEL: func.func @budget
// SMALL-COUNT-2: step.fusion "loop"
// SMALL-NOT: step.fusion
func.func @budget(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = step.exp %x : tensor<16xf32>
  %b = step.tanh %a : tensor<16xf32>
  %c = step.neg %b : tensor<16xf32>
  %d = step.exp %c : tensor<16xf32>
  %e = step.tanh %d : tensor<16xf32>
  return %e : tensor<16xf32>
}

// -----

// A causal mask: iota is an index map, so the two iotas, the compare and
// the first select are one kernel, which also yields the mask for the
// select after the matmul.
// CHECK-LABEL: func.func @causal_mask
// SMALL-LABEL: func.func @causal_mask
// CHECK: %[[F:.+]]:2 = step.fusion "loop"(%arg0, %arg1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xi1>, tensor<4x4xf32>) {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.iota dim = 1
// CHECK-NEXT: step.iota dim = 0
// CHECK-NEXT: %[[M:.+]] = step.compare gt
// CHECK-NEXT: %[[S:.+]] = step.select %[[M]]
// CHECK-NEXT: step.yield %[[M]], %[[S]]
// CHECK: %[[Y:.+]] = step.matmul %[[F]]#1, %[[F]]#1
// CHECK-NEXT: step.select %[[F]]#0, %[[Y]], %arg2
func.func @causal_mask(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %r = step.iota dim = 0 : tensor<4x4xi64>
  %k = step.iota dim = 1 : tensor<4x4xi64>
  %m = step.compare gt, %k, %r : tensor<4x4xi64>
  %x = step.select %m, %a, %b : tensor<4x4xi1>, tensor<4x4xf32>
  %y = step.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %z = step.select %m, %y, %c : tensor<4x4xi1>, tensor<4x4xf32>
  return %x, %z : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The gradient of three slices (q, k, v of a packed projection): each
// slice's gradient padded to the projection's shape, the three summed. The
// pads join the sum's loop fusion (one pass reading the three gradients,
// writing the sum) instead of each writing a mostly-zero copy.
// CHECK-LABEL: func.func @slice_gradients
// CHECK: %[[F:.+]] = step.fusion "loop"(%arg0, %arg1, %arg2) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32> {
// CHECK: step.pad %{{.+}} low = [0, 0, 0] high = [0, 0, 16]
// CHECK: step.pad %{{.+}} low = [0, 0, 8] high = [0, 0, 8]
// CHECK: step.add
// CHECK: step.pad %{{.+}} low = [0, 0, 16] high = [0, 0, 0]
// CHECK: step.add
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @slice_gradients(%dq: tensor<2x4x8xf32>, %dk: tensor<2x4x8xf32>, %dv: tensor<2x4x8xf32>) -> tensor<2x4x24xf32> {
  %pq = step.pad %dq low = [0, 0, 0] high = [0, 0, 16] value = 0.0 : tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  %pk = step.pad %dk low = [0, 0, 8] high = [0, 0, 8] value = 0.0 : tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  %s = step.add %pq, %pk : tensor<2x4x24xf32>
  %pv = step.pad %dv low = [0, 0, 16] high = [0, 0, 0] value = 0.0 : tensor<2x4x8xf32> -> tensor<2x4x24xf32>
  %r = step.add %s, %pv : tensor<2x4x24xf32>
  return %r : tensor<2x4x24xf32>
}

// -----

// A pad alone stays its own kernel (a loop needs an elementwise sink), and
// a pad is never a reduction's prologue.
// CHECK-LABEL: func.func @pad_alone
// CHECK-NOT: step.fusion
// CHECK: step.pad
// CHECK: step.reduce_sum
func.func @pad_alone(%x: tensor<4x8xf32>) -> (tensor<4x10xf32>, tensor<4xf32>) {
  %p = step.pad %x low = [0, 1] high = [0, 1] value = 2.5 : tensor<4x8xf32> -> tensor<4x10xf32>
  %r = step.reduce_sum %p dims = [1] : tensor<4x10xf32> -> tensor<4xf32>
  return %p, %r : tensor<4x10xf32>, tensor<4xf32>
}
