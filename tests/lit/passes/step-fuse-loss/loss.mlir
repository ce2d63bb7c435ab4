// RUN: step-opt %s -split-input-file --step-fuse-loss | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse --step-fuse-loss | FileCheck %s --check-prefix=PIPE

// AMP's classifier as step-fuse leaves it: the loss and its gradient in two
// reduction fusions, each widening the same bf16 logits. They become one
// fusion at the loss, with one widening cast (the prologues merged), the
// loss first and the gradient's bf16 epilogue after.
// CHECK-LABEL: func.func @amp
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x16xbf16>, %[[Y:[^:]+]]: tensor<8xi64>, %[[G:[^:]+]]: tensor<f32>)
// CHECK: %[[F:.+]]:2 = step.fusion "reduction"(%[[X]], %[[Y]], %[[G]]) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>)
// CHECK-NEXT: ^bb0(%[[BX:[^:]+]]: tensor<8x16xbf16>, %[[BY:[^:]+]]: tensor<8xi64>, %[[BG:[^:]+]]: tensor<f32>):
// CHECK-NEXT: %[[W:.+]] = step.cast %[[BX]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK-NEXT: %[[L:.+]] = step.cross_entropy %[[W]], %[[BY]] reduction = mean
// CHECK-NEXT: %[[D:.+]] = step.cross_entropy_grad %[[W]], %[[BY]], %[[BG]] reduction = mean
// CHECK-NEXT: %[[N:.+]] = step.cast %[[D]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-NEXT: step.yield %[[L]], %[[N]] : tensor<f32>, tensor<8x16xbf16>
// CHECK-NOT: step.fusion
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @amp(%x: tensor<8x16xbf16>, %y: tensor<8xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>) {
  %l = step.fusion "reduction"(%x, %y) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32> {
  ^bb0(%a: tensor<8x16xbf16>, %b: tensor<8xi64>):
    %0 = step.cast %a : tensor<8x16xbf16> -> tensor<8x16xf32>
    %1 = step.cross_entropy %0, %b reduction = mean : tensor<8x16xf32>, tensor<8xi64> -> tensor<f32>
    step.yield %1 : tensor<f32>
  }
  %d = step.fusion "reduction"(%x, %y, %g) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xbf16> {
  ^bb0(%a: tensor<8x16xbf16>, %b: tensor<8xi64>, %c: tensor<f32>):
    %0 = step.cast %a : tensor<8x16xbf16> -> tensor<8x16xf32>
    %1 = step.cross_entropy_grad %0, %b, %c reduction = mean : tensor<8x16xf32>, tensor<8xi64>, tensor<f32> -> tensor<8x16xf32>
    %2 = step.cast %1 : tensor<8x16xf32> -> tensor<8x16xbf16>
    step.yield %2 : tensor<8x16xbf16>
  }
  return %l, %d : tensor<f32>, tensor<8x16xbf16>
}

// -----

// Bare ops (f32, nothing to fuse around them), with a scalar computed in
// between (the loss scaled: small, so the gradient may run at the loss) and
// the gradient's seed defined before the loss: one fusion, the scaling
// after it. In the pipeline, step-fuse first makes the scaling the loss's
// epilogue (placed after the gradient); the pair is one fusion all the
// same, at the gradient.
// CHECK-LABEL: func.func @bare
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x10xf32>, %[[Y:[^:]+]]: tensor<4xi32>, %[[G:[^:]+]]: tensor<4xf32>, %[[S:[^:]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "reduction"(%[[X]], %[[Y]], %[[G]])
// CHECK: step.cross_entropy %{{.+}} reduction = none ignore_index = 3 :
// CHECK: step.cross_entropy_grad %{{.+}} reduction = none ignore_index = 3 :
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[M:.+]] = step.mul %[[F]]#0, %[[S]]
// CHECK-NEXT: return %[[M]], %[[F]]#1
// PIPE-LABEL: func.func @bare
// PIPE: step.fusion "reduction"
// PIPE: step.cross_entropy %
// PIPE-NEXT: step.mul
// PIPE: step.cross_entropy_grad
// PIPE: step.yield
// PIPE-NEXT: }
// PIPE-NEXT: return
func.func @bare(%x: tensor<4x10xf32>, %y: tensor<4xi32>, %g: tensor<4xf32>, %s: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x10xf32>) {
  %l = step.cross_entropy %x, %y reduction = none ignore_index = 3 : tensor<4x10xf32>, tensor<4xi32> -> tensor<4xf32>
  %m = step.mul %l, %s : tensor<4xf32>
  %d = step.cross_entropy_grad %x, %y, %g reduction = none ignore_index = 3 : tensor<4x10xf32>, tensor<4xi32>, tensor<4xf32> -> tensor<4x10xf32>
  return %m, %d : tensor<4xf32>, tensor<4x10xf32>
}

// -----

// Refused: the gradient's seed is computed from the loss (it does not
// exist where the loss runs).
// CHECK-LABEL: func.func @seed_from_loss
// CHECK: step.cross_entropy %
// CHECK: step.mul
// CHECK: step.cross_entropy_grad
// CHECK-NOT: step.fusion
func.func @seed_from_loss(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %s: tensor<f32>) -> tensor<4x10xf32> {
  %l = step.cross_entropy %x, %y reduction = sum : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %g = step.mul %l, %s : tensor<f32>
  %d = step.cross_entropy_grad %x, %y, %g reduction = sum : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  return %d : tensor<4x10xf32>
}

// -----

// Refused: a 64 KiB + 4 B value is computed between the two (the
// gradient's result would live over it).
// CHECK-LABEL: func.func @big_between
// CHECK: step.cross_entropy %
// CHECK: step.add
// CHECK: step.cross_entropy_grad
// CHECK-NOT: step.fusion
func.func @big_between(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>, %a: tensor<16385xf32>) -> (tensor<f32>, tensor<4x10xf32>, tensor<16385xf32>) {
  %l = step.cross_entropy %x, %y reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %b = step.add %a, %a : tensor<16385xf32>
  %d = step.cross_entropy_grad %x, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  return %l, %d, %b : tensor<f32>, tensor<4x10xf32>, tensor<16385xf32>
}

// -----

// Refused: a 64 KiB + 4 B value dies between the two (its last reader, a
// sum, is there): moved up, the gradient's result would live beside it.
// CHECK-LABEL: func.func @big_dies_between
// CHECK: step.cross_entropy %
// CHECK: step.reduce_sum
// CHECK: step.cross_entropy_grad
// CHECK-NOT: step.fusion
func.func @big_dies_between(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>, %a: tensor<16385xf32>) -> (tensor<f32>, tensor<4x10xf32>, tensor<f32>) {
  %b = step.add %a, %a : tensor<16385xf32>
  %l = step.cross_entropy %x, %y reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %s = step.reduce_sum %b dims = [0] : tensor<16385xf32> -> tensor<f32>
  %d = step.cross_entropy_grad %x, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  return %l, %d, %s : tensor<f32>, tensor<4x10xf32>, tensor<f32>
}

// -----

// Two heads on the same targets, their gradients in reverse order (as a
// backward runs): the first loss meets the other head's gradient first,
// which does not merge, and pairs with its own after it.
// CHECK-LABEL: func.func @two_heads
// CHECK: %[[A:.+]]:2 = step.fusion "reduction"(%arg0, %arg2, %arg3)
// CHECK: %[[B:.+]]:2 = step.fusion "reduction"(%arg1, %arg2, %arg3)
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[A]]#0, %[[B]]#0, %[[A]]#1, %[[B]]#1
func.func @two_heads(%x: tensor<4x10xf32>, %z: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<4x10xf32>, tensor<4x10xf32>) {
  %la = step.cross_entropy %x, %y reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %lb = step.cross_entropy %z, %y reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %db = step.cross_entropy_grad %z, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  %da = step.cross_entropy_grad %x, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  return %la, %lb, %da, %db : tensor<f32>, tensor<f32>, tensor<4x10xf32>, tensor<4x10xf32>
}

// -----

// Refused: other logits (the gradient of another tensor), and the same
// logits with another reduction. Each loss shares the targets with both
// gradients; every merge tried differs in its roots' logits or reduction
// and is undone.
// CHECK-LABEL: func.func @mismatch
// CHECK-NOT: step.fusion
// CHECK: step.cross_entropy %{{.+}}reduction = mean
// CHECK: step.cross_entropy_grad %{{.+}}reduction = mean
// CHECK: step.cross_entropy %{{.+}}reduction = sum
// CHECK: step.cross_entropy_grad %{{.+}}reduction = mean
// CHECK-NOT: step.fusion
func.func @mismatch(%x: tensor<4x10xf32>, %z: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>, tensor<f32>, tensor<4x10xf32>) {
  %l = step.cross_entropy %x, %y reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %d = step.cross_entropy_grad %z, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  %l2 = step.cross_entropy %z, %y reduction = sum : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %d2 = step.cross_entropy_grad %z, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  return %l, %d, %l2, %d2 : tensor<f32>, tensor<4x10xf32>, tensor<f32>, tensor<4x10xf32>
}

// -----

// Gradient accumulation's last micro-batch: step-fuse gives the loss an
// epilogue (the micro-batches' losses averaged) and places it after the
// backward, behind the gradient. The loss moves up to its gradient (its
// operands exist there; only its scalar result lives longer, and the
// logits die at the fused op).
// CHECK-LABEL: func.func @loss_after_gradient
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x10xf32>, %[[Y:[^:]+]]: tensor<4xi64>, %[[P:[^:]+]]: tensor<f32>, %[[G:[^:]+]]: tensor<f32>, %[[W:[^:]+]]: tensor<10x3xf32>)
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "reduction"(%[[X]], %[[Y]], %[[P]], %[[G]])
// CHECK: step.cross_entropy %
// CHECK-NEXT: step.add
// CHECK: step.cross_entropy_grad
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[M:.+]] = step.matmul %[[F]]#1, %[[W]]
// CHECK-NEXT: return %[[F]]#0, %[[M]]
func.func @loss_after_gradient(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %prev: tensor<f32>, %g: tensor<f32>, %w: tensor<10x3xf32>) -> (tensor<f32>, tensor<4x3xf32>) {
  %d = step.cross_entropy_grad %x, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  %m = step.matmul %d, %w : tensor<4x10xf32>, tensor<10x3xf32> -> tensor<4x3xf32>
  %l = step.fusion "reduction"(%x, %y, %prev) : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x10xf32>, %b: tensor<4xi64>, %c: tensor<f32>):
    %0 = step.cross_entropy %a, %b reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
    %1 = step.add %c, %0 : tensor<f32>
    step.yield %1 : tensor<f32>
  }
  return %l, %m : tensor<f32>, tensor<4x3xf32>
}

// -----

// Refused: the loss comes after the gradient but reads a value computed
// after the gradient (it cannot move up).
// CHECK-LABEL: func.func @loss_reads_later_value
// CHECK: step.cross_entropy_grad
// CHECK: step.matmul
// CHECK: step.cross_entropy %
// CHECK-NOT: step.fusion
func.func @loss_reads_later_value(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>, %w: tensor<10x3xf32>) -> (tensor<f32>, tensor<4x3xf32>) {
  %d = step.cross_entropy_grad %x, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  %m = step.matmul %d, %w : tensor<4x10xf32>, tensor<10x3xf32> -> tensor<4x3xf32>
  %x2 = step.add %x, %x : tensor<4x10xf32>
  %l = step.cross_entropy %x2, %y reduction = mean : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return %l, %m : tensor<f32>, tensor<4x3xf32>
}

// -----

// The pipeline on AMP's classifier as step-autodiff and step-amp leave it:
// step-fuse gives the loss and the gradient a fusion each (the widening
// cast copied into both), step-fuse-loss makes them one.
// Alone, step-fuse-loss merges the bare pair and leaves the casts out.
// CHECK-LABEL: func.func @amp_ops
// CHECK: step.cast
// CHECK-NEXT: step.fusion "reduction"
// CHECK-NOT: step.cast
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: step.cast
// PIPE-LABEL: func.func @amp_ops
// PIPE: %[[F:.+]]:2 = step.fusion "reduction"
// PIPE: step.cast
// PIPE-NOT: step.cast
// PIPE: step.cross_entropy %
// PIPE: step.cross_entropy_grad
// PIPE: step.cast
// PIPE: step.yield
// PIPE-NOT: step.fusion
// PIPE: return %[[F]]#0, %[[F]]#1
func.func @amp_ops(%x: tensor<8x16xbf16>, %y: tensor<8xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x16xbf16>) {
  %0 = step.cast %x : tensor<8x16xbf16> -> tensor<8x16xf32>
  %l = step.cross_entropy %0, %y reduction = mean : tensor<8x16xf32>, tensor<8xi64> -> tensor<f32>
  %1 = step.cross_entropy_grad %0, %y, %g reduction = mean : tensor<8x16xf32>, tensor<8xi64>, tensor<f32> -> tensor<8x16xf32>
  %d = step.cast %1 : tensor<8x16xf32> -> tensor<8x16xbf16>
  return %l, %d : tensor<f32>, tensor<8x16xbf16>
}
