// RUN: step-opt %s -split-input-file --step-fuse | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse="row-ops=false" | FileCheck %s --check-prefix=NOROW

// A sum of squares over rows with its rsqrt epilogue: one reduction fusion.
// CHECK-LABEL: func.func @rms
// CHECK: %[[F:.+]] = step.fusion "reduction"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: step.mul
// CHECK-NEXT: step.reduce_sum %{{.+}} dims = [1]
// CHECK-NEXT: step.add
// CHECK-NEXT: step.rsqrt
// CHECK-NEXT: step.yield
// CHECK: return %[[F]]
func.func @rms(%x: tensor<4x8xf32>, %eps: tensor<4xf32>) -> tensor<4xf32> {
  %sq = step.mul %x, %x : tensor<4x8xf32>
  %s = step.reduce_sum %sq dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %a = step.add %s, %eps : tensor<4xf32>
  %r = step.rsqrt %a : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Siblings: two reductions over the same dims of inputs that share %dy
// (layer-norm backward) are one multi-output fusion.
// CHECK-LABEL: func.func @siblings
// CHECK: %[[F:.+]]:2 = step.fusion "reduction"(%arg0, %arg1)
// CHECK: step.reduce_mean
// CHECK: step.mul
// CHECK: step.reduce_mean
// CHECK: step.yield %{{.+}}, %{{.+}} : tensor<4xf32>, tensor<4xf32>
// CHECK-NOT: step.fusion "reduction"
func.func @siblings(%dy: tensor<4x8xf32>, %xhat: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = step.reduce_mean %dy dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %p = step.mul %dy, %xhat : tensor<4x8xf32>
  %b = step.reduce_mean %p dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// Refused: a reduction feeding a broadcast of its result across the
// reduced dim. The broadcast and the subtraction form a loop fusion that
// reads the reduction's result; they are not the reduction's epilogue.
// CHECK-LABEL: func.func @center
// CHECK: %[[M:.+]] = step.reduce_mean %arg0 dims = [1]
// CHECK-NEXT: %[[F:.+]] = step.fusion "loop"(%[[M]], %arg0)
// CHECK: step.broadcast_in_dim
// CHECK: step.sub
// CHECK: step.yield
// CHECK: return %[[F]]
func.func @center(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = step.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %c = step.sub %x, %mb : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// Refused: ops across a matmul. The scale before it and the reduction
// after it are separate fusions.
// CHECK-LABEL: func.func @across_matmul
// CHECK: step.fusion "loop"
// CHECK: step.matmul
// CHECK: step.fusion "reduction"
func.func @across_matmul(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4xf32> {
  %a = step.mul %x, %x : tensor<4x4xf32>
  %b = step.exp %a : tensor<4x4xf32>
  %m = step.matmul %b, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = step.tanh %m : tensor<4x4xf32>
  %s = step.reduce_sum %t dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A row op (softmax) is a root: its scaled input is the prologue. With
// row-ops=false it is left alone and the scale is a loop fusion... of one
// op, so nothing is fused.
// CHECK-LABEL: func.func @softmax_prologue
// CHECK: step.fusion "reduction"(%arg0, %arg1)
// CHECK: step.mul
// CHECK: step.softmax
// NOROW-LABEL: func.func @softmax_prologue
// NOROW-NOT: step.fusion
func.func @softmax_prologue(%x: tensor<4x8xf32>, %s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = step.mul %x, %s : tensor<4x8xf32>
  %p = step.softmax %a dim = 1 : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// A reshape of a group value read only after the group leaves it: the
// fusion yields the value once and the reshape after it is a view
// (step-memory-plan gives it the same bytes), not a second buffer.
// CHECK-LABEL: func.func @view_leaves
// NOROW-LABEL: func.func @view_leaves
// CHECK: %[[F:.+]] = step.fusion "reduction"
// CHECK: step.softmax
// CHECK-NOT: step.reshape
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[R:.+]] = step.reshape %[[F]] : tensor<4x8xf32> -> tensor<1x32xf32>
// CHECK: step.matmul
func.func @view_leaves(%x: tensor<4x8xf32>, %s: tensor<4x8xf32>, %w: tensor<32x32xf32>) -> tensor<1x32xf32> {
  %a = step.mul %x, %s : tensor<4x8xf32>
  %p = step.softmax %a dim = 1 : tensor<4x8xf32>
  %r = step.reshape %p : tensor<4x8xf32> -> tensor<1x32xf32>
  %m = step.matmul %r, %w : tensor<1x32xf32>, tensor<32x32xf32> -> tensor<1x32xf32>
  return %m : tensor<1x32xf32>
}

// -----

// A row op's other operands are read as inputs: layer_norm's gamma (%gw),
// also used by the epilogue, is computed outside the fusion.
// CHECK-LABEL: func.func @row_operands_are_inputs
// NOROW-LABEL: func.func @row_operands_are_inputs
// CHECK: %[[GW:.+]] = step.neg %arg1
// CHECK: step.fusion "reduction"(%arg0, %[[GW]], %arg2)
// CHECK-NOT: step.neg
// CHECK: step.layer_norm
// CHECK: step.yield
func.func @row_operands_are_inputs(%x: tensor<8x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %gw = step.neg %w : tensor<32xf32>
  %ln = step.layer_norm %x, %gw, %b eps = 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %bg = step.broadcast_in_dim %gw, dims = [1] : tensor<32xf32> -> tensor<8x32xf32>
  %o = step.add %ln, %bg : tensor<8x32xf32>
  return %o : tensor<8x32xf32>
}

// -----

// The residual add before a layer_norm, whose sum the next residual add
// also reads, joins the layer_norm's kernel and is yielded with it; the
// later add reads the fusion's first result.
// CHECK-LABEL: func.func @residual_layer_norm
// CHECK: %[[F:.+]]:2 = step.fusion "reduction"(%arg0, %arg1, %arg2, %arg3) : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[S:.+]] = step.add
// CHECK-NEXT: %[[L:.+]] = step.layer_norm %[[S]]
// CHECK-NEXT: step.yield %[[S]], %[[L]]
// CHECK: step.matmul %[[F]]#1
// CHECK: step.add %[[F]]#0
// NOROW-LABEL: func.func @residual_layer_norm
// NOROW: step.add %arg0, %arg1
// NOROW: step.layer_norm
func.func @residual_layer_norm(%x: tensor<8x32xf32>, %h: tensor<8x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>, %m: tensor<32x32xf32>) -> tensor<8x32xf32> {
  %s = step.add %x, %h : tensor<8x32xf32>
  %ln = step.layer_norm %s, %w, %b eps = 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %y = step.matmul %ln, %m : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  %o = step.add %s, %y : tensor<8x32xf32>
  return %o : tensor<8x32xf32>
}

// -----

// Under softmax too (the exp reading the sum sinks after the root, so the
// sum's only other reader comes later); cross_entropy's result is smaller
// than its input, so its kernel never stores a prologue value: the product
// another op reads stays outside and the loss is left unfused.
// CHECK-LABEL: func.func @softmax_yields_its_prologue
// CHECK: %[[F:.+]]:2 = step.fusion "reduction"(%arg0, %arg1)
// CHECK: step.yield %{{.+}}, %{{.+}} : tensor<8x32xf32>, tensor<8x32xf32>
// CHECK: step.exp %[[F]]#0
// CHECK-LABEL: func.func @cross_entropy_keeps_its_prologue_outside
// CHECK-NEXT: %[[C:.+]] = step.mul %arg0, %arg0
// CHECK-NEXT: step.cross_entropy %[[C]], %arg1
// CHECK-NOT: step.fusion
func.func @softmax_yields_its_prologue(%x: tensor<8x32xf32>, %h: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %a = step.add %x, %h : tensor<8x32xf32>
  %early = step.exp %a : tensor<8x32xf32>
  %p = step.softmax %a dim = 1 : tensor<8x32xf32>
  return %early, %p : tensor<8x32xf32>, tensor<8x32xf32>
}
func.func @cross_entropy_keeps_its_prologue_outside(%x: tensor<8x32xf32>, %t: tensor<8xi64>) -> (tensor<f32>, tensor<8x32xf32>) {
  %c = step.mul %x, %x : tensor<8x32xf32>
  %l = step.cross_entropy %c, %t reduction = mean : tensor<8x32xf32>, tensor<8xi64> -> tensor<f32>
  return %l, %c : tensor<f32>, tensor<8x32xf32>
}

// -----

// A cast read by two reductions is copied into both (each converts the
// bf16 source itself) and the f32 tensor is never stored; the reshape
// before it is copied too. The targets' reshape, read as an input by both,
// stays a view outside.
// CHECK-LABEL: func.func @cast_copied_into_each_loss
// CHECK-NOT: step.fusion "loop"
// CHECK: %[[T:.+]] = step.reshape %arg1
// CHECK: step.fusion "reduction"(%arg0, %[[T]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: step.reshape
// CHECK-NEXT: step.cast
// CHECK-NEXT: step.cross_entropy
// CHECK: step.fusion "reduction"(%arg0, %[[T]], %arg2)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: step.reshape
// CHECK-NEXT: step.cast
// CHECK-NEXT: step.cross_entropy_grad
// CHECK-NOT: step.cast
// CHECK: return
func.func @cast_copied_into_each_loss(%x: tensor<4x2x32xbf16>, %t0: tensor<4x2xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x32xf32>) {
  %t = step.reshape %t0 : tensor<4x2xi64> -> tensor<8xi64>
  %r = step.reshape %x : tensor<4x2x32xbf16> -> tensor<8x32xbf16>
  %c = step.cast %r : tensor<8x32xbf16> -> tensor<8x32xf32>
  %l = step.cross_entropy %c, %t reduction = mean : tensor<8x32xf32>, tensor<8xi64> -> tensor<f32>
  %d = step.cross_entropy_grad %c, %t, %g reduction = mean : tensor<8x32xf32>, tensor<8xi64>, tensor<f32> -> tensor<8x32xf32>
  return %l, %d : tensor<f32>, tensor<8x32xf32>
}

// -----

// Recomputable producers (layer norm's gradient): x - mean and its product
// with rstd read x and two row vectors, no more bytes than they write, so
// each consumer (a row sum, a column sum, and the loop after them)
// computes them again instead of reading them back: nothing of that size
// is stored between the fusions, and the ops die at outlining.
// CHECK-LABEL: func.func @recompute_centred
// CHECK-NOT: step.sub
// CHECK: %[[R:.+]] = step.fusion "reduction"
// CHECK: step.sub
// CHECK: step.mul
// CHECK: step.reduce_sum %{{.+}} dims = [1]
// CHECK: %[[C:.+]] = step.fusion "reduction"
// CHECK: step.sub
// CHECK: step.mul
// CHECK: step.reduce_sum %{{.+}} dims = [0]
// CHECK: %[[L:.+]] = step.fusion "loop"
// CHECK: step.sub
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]], %[[C]], %[[L]]
func.func @recompute_centred(%x: tensor<4x8xf32>, %m: tensor<4xf32>, %r: tensor<4xf32>, %dy: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %xc = step.sub %x, %mb : tensor<4x8xf32>
  %rb = step.broadcast_in_dim %r, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %xh = step.mul %xc, %rb : tensor<4x8xf32>
  %p = step.mul %dy, %xh : tensor<4x8xf32>
  %rows = step.reduce_sum %p dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %cols = step.reduce_sum %xh dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %rsb = step.broadcast_in_dim %rows, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %q = step.mul %xh, %rsb : tensor<4x8xf32>
  %o = step.sub %dy, %q : tensor<4x8xf32>
  return %rows, %cols, %o : tensor<4xf32>, tensor<8xf32>, tensor<4x8xf32>
}

// -----

// Not recomputable: a sum of two full tensors reads twice what it writes;
// it is stored once and both reductions read it (each recomputing the
// relu of it, which reads what it writes).
// CHECK-LABEL: func.func @stored_sum
// CHECK: %[[S:.+]] = step.add
// CHECK-NEXT: step.fusion "reduction"(%[[S]])
// CHECK-NOT: step.add
// CHECK: step.relu
// CHECK: step.fusion "reduction"(%[[S]])
// CHECK-NOT: step.add
// CHECK: step.relu
// CHECK: return
func.func @stored_sum(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %s = step.add %x, %y : tensor<4x8xf32>
  %a = step.relu %s : tensor<4x8xf32>
  %rows = step.reduce_sum %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %n = step.neg %a : tensor<4x8xf32>
  %cols = step.reduce_sum %n dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %rows, %cols : tensor<4xf32>, tensor<8xf32>
}
