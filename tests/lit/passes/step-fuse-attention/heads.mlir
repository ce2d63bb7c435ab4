// RUN: step-opt %s -split-input-file --step-fuse-attention | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse-attention --step-fuse | FileCheck %s --check-prefix=FUSED

// GPT-2's layer: q, k, v sliced out of the packed projection, split into
// heads and transposed; the output transposed back; the gradient reads the
// same heads, its upstream gradient through the same transposes, and the
// forward's saved result. Both attentions become fusions that read the
// packed projection in place; no slice or transpose is left outside them.
// The gradient's saved result is the forward fusion's [B, T, H, D] result
// read back through the inverse transpose, inside the gradient's fusion.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[QKV:[^:]+]]: tensor<2x16x96xbf16>, %[[G:[^:]+]]: tensor<2x16x32xbf16>)
// CHECK-NOT: step.transpose
// CHECK: %[[F:.+]]:2 = step.fusion "attention"(%[[QKV]]) : (tensor<2x16x96xbf16>) -> (tensor<2x16x2x16xbf16>, tensor<2x2x16xf32>)
// CHECK: step.slice %{{.+}} start = [0, 0, 0] limit = [2, 16, 32]
// CHECK: step.slice %{{.+}} start = [0, 0, 32] limit = [2, 16, 64]
// CHECK: step.slice %{{.+}} start = [0, 0, 64] limit = [2, 16, 96]
// CHECK: %[[O:.+]], %[[LSE:.+]] = step.attention_lse
// CHECK: %[[T:.+]] = step.transpose %[[O]], perm = [0, 2, 1, 3]
// CHECK: step.yield %[[T]], %[[LSE]] : tensor<2x16x2x16xbf16>, tensor<2x2x16xf32>
// CHECK: %[[R:.+]] = step.reshape %[[F]]#0 : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
// CHECK-NOT: step.transpose
// CHECK-NOT: step.slice
// CHECK: %[[D:.+]]:3 = step.fusion "attention"(%[[QKV]], %[[G]], %[[F]]#0, %[[F]]#1) : (tensor<2x16x96xbf16>, tensor<2x16x32xbf16>, tensor<2x16x2x16xbf16>, tensor<2x2x16xf32>) -> (tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>)
// CHECK-NEXT: ^bb0(%{{[^:]+}}: tensor<2x16x96xbf16>, %{{[^:]+}}: tensor<2x16x32xbf16>, %[[SAVED:[^:]+]]: tensor<2x16x2x16xbf16>, %[[SL:[^:]+]]: tensor<2x2x16xf32>):
// CHECK: %[[SO:.+]] = step.transpose %[[SAVED]], perm = [0, 2, 1, 3]
// CHECK: step.attention_grad %{{.+}} saved(%[[SO]], %[[SL]] :
// CHECK-COUNT-3: step.transpose %d
// CHECK: step.yield
// CHECK-NOT: step.transpose
// CHECK-NOT: step.slice
// CHECK: return %[[R]], %[[D]]#0, %[[D]]#1, %[[D]]#2
// step-fuse leaves the attention fusions alone and groups nothing else here.
// FUSED-LABEL: func.func @layer
// FUSED-COUNT-2: step.fusion "attention"
// FUSED-NOT: step.fusion
func.func @layer(%qkv: tensor<2x16x96xbf16>, %g: tensor<2x16x32xbf16>)
    -> (tensor<2x16x32xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>) {
  %s0 = step.slice %qkv start = [0, 0, 0] limit = [2, 16, 32] strides = [1, 1, 1] : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>
  %r0 = step.reshape %s0 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %q = step.transpose %r0, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %s1 = step.slice %qkv start = [0, 0, 32] limit = [2, 16, 64] strides = [1, 1, 1] : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>
  %r1 = step.reshape %s1 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %k = step.transpose %r1, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %s2 = step.slice %qkv start = [0, 0, 64] limit = [2, 16, 96] strides = [1, 1, 1] : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>
  %r2 = step.reshape %s2 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %v = step.transpose %r2, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %o, %lse = step.attention_lse %q, %k, %v causal : tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16> -> tensor<2x2x16x16xbf16>, tensor<2x2x16xf32>
  %ot = step.transpose %o, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %out = step.reshape %ot : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %gr = step.reshape %g : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %gt = step.transpose %gr, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %d:3 = step.attention_grad %q, %k, %v, %gt saved(%o, %lse : tensor<2x2x16x16xbf16>, tensor<2x2x16xf32>) causal : tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16> -> tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>
  %dq = step.transpose %d#0, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %dk = step.transpose %d#1, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %dv = step.transpose %d#2, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  return %out, %dq, %dk, %dv : tensor<2x16x32xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>
}

// -----

// Refused: operands already contiguous and results used as they are (no
// chain, no fusion); a transpose that moves the innermost dim (its view
// would not have unit stride): k is read after that copy.
// CHECK-LABEL: func.func @refused
// FUSED-LABEL: func.func @refused
// CHECK-NOT: step.fusion
// CHECK: %[[KT:.+]] = step.transpose %arg1, perm = [0, 1, 3, 2]
// CHECK: step.attention %arg0, %[[KT]], %arg2
func.func @refused(%q: tensor<2x2x16x16xf32>, %kx: tensor<2x2x16x16xf32>, %v: tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32> {
  %k = step.transpose %kx, perm = [0, 1, 3, 2] : tensor<2x2x16x16xf32> -> tensor<2x2x16x16xf32>
  %o = step.attention %q, %k, %v : tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32> -> tensor<2x2x16x16xf32>
  return %o : tensor<2x2x16x16xf32>
}

// -----

// 16-byte rows kept: a slice at column 4 of bf16 rows would start heads at
// 8-byte offsets, so the slice stays a copy and only the reshape and
// transpose after it join (the tensor-core kernels need aligned rows). An
// f32 head of width 6 has no 16-byte rows to keep: its slice joins.
// CHECK-LABEL: func.func @aligned
// CHECK: %[[S:.+]] = step.slice %arg0 start = [0, 0, 4]
// CHECK: step.fusion "attention"(%[[S]]) : (tensor<2x16x32xbf16>)
// CHECK-LABEL: func.func @unaligned_f32
// CHECK-NOT: step.slice %arg0
// CHECK: step.fusion "attention"(%arg0) : (tensor<2x16x14xf32>)
// CHECK: step.slice
func.func @aligned(%x: tensor<2x16x40xbf16>) -> tensor<2x2x16x16xbf16> {
  %s = step.slice %x start = [0, 0, 4] limit = [2, 16, 36] strides = [1, 1, 1] : tensor<2x16x40xbf16> -> tensor<2x16x32xbf16>
  %r = step.reshape %s : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %q = step.transpose %r, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %o = step.attention %q, %q, %q causal : tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16> -> tensor<2x2x16x16xbf16>
  return %o : tensor<2x2x16x16xbf16>
}
func.func @unaligned_f32(%x: tensor<2x16x14xf32>) -> tensor<2x2x16x6xf32> {
  %s = step.slice %x start = [0, 0, 2] limit = [2, 16, 14] strides = [1, 1, 1] : tensor<2x16x14xf32> -> tensor<2x16x12xf32>
  %r = step.reshape %s : tensor<2x16x12xf32> -> tensor<2x16x2x6xf32>
  %q = step.transpose %r, perm = [0, 2, 1, 3] : tensor<2x16x2x6xf32> -> tensor<2x2x16x6xf32>
  %o = step.attention %q, %q, %q : tensor<2x2x16x6xf32>, tensor<2x2x16x6xf32>, tensor<2x2x16x6xf32> -> tensor<2x2x16x6xf32>
  return %o : tensor<2x2x16x6xf32>
}

// -----

// Chains that share ops: k and v are the slice that q's chain also goes
// through (each op cloned once, erased once). One query row (T = 1): its
// row stride is never used, so the 8-element alignment holds.
// CHECK-LABEL: func.func @shared
// CHECK-NEXT: %[[F:.+]] = step.fusion "attention"(%arg0) : (tensor<2x1x40xbf16>)
// CHECK-COUNT-1: step.slice
// CHECK-NOT: step.slice
// CHECK: step.transpose
// CHECK: step.attention
// CHECK: return %[[F]]
func.func @shared(%x: tensor<2x1x40xbf16>) -> tensor<2x2x1x16xbf16> {
  %s = step.slice %x start = [0, 0, 8] limit = [2, 1, 40] strides = [1, 1, 1] : tensor<2x1x40xbf16> -> tensor<2x1x32xbf16>
  %r = step.reshape %s : tensor<2x1x32xbf16> -> tensor<2x1x2x16xbf16>
  %q = step.transpose %r, perm = [0, 2, 1, 3] : tensor<2x1x2x16xbf16> -> tensor<2x2x1x16xbf16>
  %k = step.reshape %s : tensor<2x1x32xbf16> -> tensor<2x2x1x16xbf16>
  %o = step.attention %q, %k, %k : tensor<2x2x1x16xbf16>, tensor<2x2x1x16xbf16>, tensor<2x2x1x16xbf16> -> tensor<2x2x1x16xbf16>
  return %o : tensor<2x2x1x16xbf16>
}

// -----

// A reshape that merges dims not adjacent in memory (batch and head after
// the transpose) has no strided view: the transpose stays a copy; the
// reshape after it is a view already, so no fusion forms for it alone.
// CHECK-LABEL: func.func @merge
// CHECK-NOT: step.fusion
// CHECK: %[[T:.+]] = step.transpose %arg0
// CHECK: %[[Q:.+]] = step.reshape %[[T]]
// CHECK: step.attention %[[Q]], %[[Q]], %[[Q]]
func.func @merge(%x: tensor<2x16x2x16xf32>) -> tensor<4x16x16xf32> {
  %t = step.transpose %x, perm = [0, 2, 1, 3] : tensor<2x16x2x16xf32> -> tensor<2x2x16x16xf32>
  %q = step.reshape %t : tensor<2x2x16x16xf32> -> tensor<4x16x16xf32>
  %o = step.attention %q, %q, %q : tensor<4x16x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32> -> tensor<4x16x16xf32>
  return %o : tensor<4x16x16xf32>
}

// -----

// The gradient of the packed projection: dq, dk and dv, each padded into
// its window of [B, T, 3C] and the pads summed (the VJPs of the slices q,
// k, v), are one concatenation; the fusion yields it, each kernel writing
// its window, and no pad or add is left. Its bias gradient reads the
// fusion's result.
// CHECK-LABEL: func.func @packed
// CHECK: %[[F:.+]] = step.fusion "attention"(%arg0, %arg1, %arg2, %arg3) : (tensor<2x16x96xbf16>, tensor<2x16x32xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16xf32>) -> tensor<2x16x96xbf16>
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = step.attention_grad
// CHECK: %[[TQ:.+]] = step.transpose %[[DQ]]
// CHECK: %[[TK:.+]] = step.transpose %[[DK]]
// CHECK: %[[TV:.+]] = step.transpose %[[DV]]
// CHECK: %[[RQ:.+]] = step.reshape %[[TQ]]
// CHECK: %[[RK:.+]] = step.reshape %[[TK]]
// CHECK: %[[RV:.+]] = step.reshape %[[TV]]
// CHECK: %[[C:.+]] = step.concat %[[RQ]], %[[RK]], %[[RV]] dim = 2
// CHECK: step.yield %[[C]] : tensor<2x16x96xbf16>
// CHECK-NOT: step.pad
// CHECK-NOT: step.add
// CHECK: %[[B:.+]] = step.reduce_sum %[[F]] dims = [0, 1]
// CHECK: return %[[F]], %[[B]]
// FUSED-LABEL: func.func @packed
// FUSED: step.fusion "attention"
// FUSED-NOT: step.fusion
// FUSED: step.reduce_sum
func.func @packed(%qkv: tensor<2x16x96xbf16>, %g: tensor<2x16x32xbf16>, %o: tensor<2x2x16x16xbf16>, %lse: tensor<2x2x16xf32>) -> (tensor<2x16x96xbf16>, tensor<96xbf16>) {
  %s0 = step.slice %qkv start = [0, 0, 0] limit = [2, 16, 32] strides = [1, 1, 1] : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>
  %r0 = step.reshape %s0 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %q = step.transpose %r0, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %s1 = step.slice %qkv start = [0, 0, 32] limit = [2, 16, 64] strides = [1, 1, 1] : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>
  %r1 = step.reshape %s1 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %k = step.transpose %r1, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %s2 = step.slice %qkv start = [0, 0, 64] limit = [2, 16, 96] strides = [1, 1, 1] : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>
  %r2 = step.reshape %s2 : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %v = step.transpose %r2, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %gr = step.reshape %g : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
  %gt = step.transpose %gr, perm = [0, 2, 1, 3] : tensor<2x16x2x16xbf16> -> tensor<2x2x16x16xbf16>
  %d:3 = step.attention_grad %q, %k, %v, %gt saved(%o, %lse : tensor<2x2x16x16xbf16>, tensor<2x2x16xf32>) causal : tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16> -> tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>
  %dq = step.transpose %d#0, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %dk = step.transpose %d#1, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %dv = step.transpose %d#2, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %fq = step.reshape %dq : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %fk = step.reshape %dk : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %fv = step.reshape %dv : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %pv = step.pad %fv low = [0, 0, 64] high = [0, 0, 0] value = 0.0 : tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %pk = step.pad %fk low = [0, 0, 32] high = [0, 0, 32] value = 0.0 : tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %a0 = step.add %pv, %pk : tensor<2x16x96xbf16>
  %pq = step.pad %fq low = [0, 0, 0] high = [0, 0, 64] value = 0.0 : tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %a1 = step.add %a0, %pq : tensor<2x16x96xbf16>
  %b = step.reduce_sum %a1 dims = [0, 1] : tensor<2x16x96xbf16> -> tensor<96xbf16>
  return %a1, %b : tensor<2x16x96xbf16>, tensor<96xbf16>
}

// -----

// Not packed: dk's and dv's pads leave a gap (columns 32..40 are zero, not
// a concatenation), so each gradient is yielded on its own and the pads
// and adds stay.
// CHECK-LABEL: func.func @gap
// CHECK: step.fusion "attention"{{.*}} -> (tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>)
// CHECK-NOT: step.concat
// CHECK-COUNT-2: step.pad
// CHECK: step.add
func.func @gap(%q: tensor<2x2x16x16xbf16>, %g: tensor<2x2x16x16xbf16>, %o: tensor<2x2x16x16xbf16>, %lse: tensor<2x2x16xf32>) -> (tensor<2x16x72xbf16>, tensor<2x16x2x16xbf16>) {
  %d:3 = step.attention_grad %q, %q, %q, %g saved(%o, %lse : tensor<2x2x16x16xbf16>, tensor<2x2x16xf32>) causal : tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16> -> tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>, tensor<2x2x16x16xbf16>
  %dq = step.transpose %d#0, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %dk = step.transpose %d#1, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %dv = step.transpose %d#2, perm = [0, 2, 1, 3] : tensor<2x2x16x16xbf16> -> tensor<2x16x2x16xbf16>
  %fk = step.reshape %dk : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %fv = step.reshape %dv : tensor<2x16x2x16xbf16> -> tensor<2x16x32xbf16>
  %pk = step.pad %fk low = [0, 0, 0] high = [0, 0, 40] value = 0.0 : tensor<2x16x32xbf16> -> tensor<2x16x72xbf16>
  %pv = step.pad %fv low = [0, 0, 40] high = [0, 0, 0] value = 0.0 : tensor<2x16x32xbf16> -> tensor<2x16x72xbf16>
  %a = step.add %pk, %pv : tensor<2x16x72xbf16>
  return %a, %dq : tensor<2x16x72xbf16>, tensor<2x16x2x16xbf16>
}
