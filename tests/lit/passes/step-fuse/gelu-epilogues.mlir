// RUN: step-opt %s -split-input-file --step-fuse="gelu-epilogues=true" | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse | FileCheck %s --check-prefix=OFF

// The MLP of a training step: GELU's input is read again by the backward.
// With gelu-epilogues the GELU joins its matmul and the fusion yields its
// input too (cuBLASLt's GELU_AUX_BIAS); without, only the bias folds.
// CHECK-LABEL: func.func @gelu_aux
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "matmul"(%arg0, %arg1, %arg2) : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.matmul
// CHECK-NEXT: step.broadcast_in_dim
// CHECK-NEXT: %[[H:.+]] = step.add
// CHECK-NEXT: %[[G:.+]] = step.gelu %[[H]] approximate tanh
// CHECK-NEXT: step.yield %[[H]], %[[G]]
// CHECK: return %[[F]]#1, %[[F]]#0
// OFF-LABEL: func.func @gelu_aux
// OFF: step.fusion "matmul"
// OFF-NOT: step.gelu
// OFF: step.yield
// OFF: step.gelu
func.func @gelu_aux(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %m = step.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<16xbf16> -> tensor<4x16xbf16>
  %h = step.add %m, %bb : tensor<4x16xbf16>
  %g = step.gelu %h approximate tanh : tensor<4x16xbf16>
  return %g, %h : tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

// Its backward: the gradient dy w^T times GELU's derivative at h, and the
// bias gradient (the sum over every dim but the last) in the same call
// (DGELU_BGRAD); the gradient is yielded for the weight gradient's matmul.
// CHECK-LABEL: func.func @dgelu_bgrad
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "matmul"(%arg0, %arg1, %arg2) : (tensor<2x4x8xbf16>, tensor<16x8xbf16>, tensor<2x4x16xbf16>) -> (tensor<2x4x16xbf16>, tensor<16xbf16>)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[M:.+]] = step.matmul {{.+}} transpose_b
// CHECK-NEXT: %[[D:.+]] = step.gelu_grad %[[M]], %{{.+}} approximate tanh
// CHECK-NEXT: %[[S:.+]] = step.reduce_sum %[[D]] dims = [0, 1]
// CHECK-NEXT: step.yield %[[D]], %[[S]]
// CHECK: step.reshape %[[F]]#0
// CHECK: return %{{.+}}, %[[F]]#1
// Without: step-fuse leaves the three apart (step-fuse-loop-reductions
// then makes the last two one kernel).
// OFF-LABEL: func.func @dgelu_bgrad
// OFF-NEXT: step.matmul
// OFF-NEXT: step.gelu_grad
// OFF-NEXT: step.reduce_sum
func.func @dgelu_bgrad(%dy: tensor<2x4x8xbf16>, %w: tensor<16x8xbf16>, %h: tensor<2x4x16xbf16>, %x: tensor<8x8xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>) {
  %m = step.matmul %dy, %w transpose_b : tensor<2x4x8xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
  %d = step.gelu_grad %m, %h approximate tanh : tensor<2x4x16xbf16>
  %s = step.reduce_sum %d dims = [0, 1] : tensor<2x4x16xbf16> -> tensor<16xbf16>
  %d2 = step.reshape %d : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
  %dw = step.matmul %x, %d2 transpose_a : tensor<8x8xbf16>, tensor<8x16xbf16> -> tensor<8x16xbf16>
  return %dw, %s : tensor<8x16xbf16>, tensor<16xbf16>
}

// -----

// Without a bias to sum: DGELU alone.
// CHECK-LABEL: func.func @dgelu
// CHECK-NEXT: %[[F:.+]] = step.fusion "matmul"
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.matmul
// CHECK-NEXT: %[[D:.+]] = step.gelu_grad
// CHECK-NEXT: step.yield %[[D]] : tensor<4x16xf32>
func.func @dgelu(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>, %h: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = step.matmul %dy, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %d = step.gelu_grad %m, %h approximate tanh : tensor<4x16xf32>
  return %d : tensor<4x16xf32>
}

// -----

// A contraction of one (K = 1): cuBLASLt has no DGELU kernels for it, so
// the gradient stays a kernel of its own and the matmul a plain call.
// CHECK-LABEL: func.func @dgelu_k1
// CHECK-NOT: step.fusion "matmul"
// CHECK: step.matmul %arg0, %arg1 : tensor<4x1xf32>, tensor<1x16xf32>
// CHECK-NOT: step.fusion "matmul"
// CHECK: return
func.func @dgelu_k1(%dy: tensor<4x1xf32>, %w: tensor<1x16xf32>, %h: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = step.matmul %dy, %w : tensor<4x1xf32>, tensor<1x16xf32> -> tensor<4x16xf32>
  %d = step.gelu_grad %m, %h approximate tanh : tensor<4x16xf32>
  return %d : tensor<4x16xf32>
}

// -----

// Refused, each for a reason cuBLASLt has: the erf GELU (its epilogues are
// the tanh form), the product as gelu_grad's input instead of its
// gradient, a last dim that is not a multiple of 8 (the aux leading dim),
// a batched rhs (one aux matrix per call), and a sum over another dim
// (not the bias gradient: it stays a reduction of its own).
// CHECK-LABEL: func.func @refused
// CHECK-NOT: step.fusion "matmul"
// CHECK: step.gelu_grad %{{.+}} approximate none
// CHECK-NOT: step.fusion "matmul"
// CHECK: return
func.func @refused(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>, %h: tensor<4x16xf32>,
                   %w12: tensor<8x12xf32>, %h12: tensor<4x12xf32>,
                   %bdy: tensor<2x4x8xf32>, %bw: tensor<2x8x16xf32>, %bh: tensor<2x4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>, tensor<2x4x16xf32>) {
  %m0 = step.matmul %dy, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %d0 = step.gelu_grad %m0, %h approximate none : tensor<4x16xf32>
  %m1 = step.matmul %dy, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %d1 = step.gelu_grad %h, %m1 approximate tanh : tensor<4x16xf32>
  %m2 = step.matmul %dy, %w12 : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %d2 = step.gelu_grad %m2, %h12 approximate tanh : tensor<4x12xf32>
  %m3 = step.matmul %bdy, %bw : tensor<2x4x8xf32>, tensor<2x8x16xf32> -> tensor<2x4x16xf32>
  %d3 = step.gelu_grad %m3, %bh approximate tanh : tensor<2x4x16xf32>
  return %d0, %d1, %d2, %d3 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>, tensor<2x4x16xf32>
}

// -----

// A sum over the rows' dim is not the bias gradient: DGELU, the sum apart.
// CHECK-LABEL: func.func @other_sum
// CHECK: %[[F:.+]] = step.fusion "matmul"
// CHECK-NOT: step.reduce_sum
// CHECK: step.yield
// CHECK: step.reduce_sum %[[F]] dims = [1]
func.func @other_sum(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>, %h: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>) {
  %m = step.matmul %dy, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %d = step.gelu_grad %m, %h approximate tanh : tensor<4x16xf32>
  %s = step.reduce_sum %d dims = [1] : tensor<4x16xf32> -> tensor<4xf32>
  return %d, %s : tensor<4x16xf32>, tensor<4xf32>
}

// -----

// The sum with kept dims ([1, 16], not the bias vector cuBLASLt writes),
// and a gradient read only by its sum (no D to store: cuBLASLt writes D
// either way): DGELU, each sum a reduction of its own.
// CHECK-LABEL: func.func @sums_left_out
// CHECK: %[[F:.+]] = step.fusion "matmul"
// CHECK-NOT: step.reduce_sum
// CHECK: step.yield %{{.+}} : tensor<4x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: step.reduce_sum %[[F]] dims = [0] keepdim
// CHECK-NEXT: %[[G:.+]] = step.fusion "matmul"
// CHECK-NOT: step.reduce_sum
// CHECK: step.yield %{{.+}} : tensor<4x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: step.reduce_sum %[[G]] dims = [0] :
func.func @sums_left_out(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>, %h: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<1x16xf32>, tensor<16xf32>) {
  %m = step.matmul %dy, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %d = step.gelu_grad %m, %h approximate tanh : tensor<4x16xf32>
  %s = step.reduce_sum %d dims = [0] keepdim : tensor<4x16xf32> -> tensor<1x16xf32>
  %m2 = step.matmul %dy, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %d2 = step.gelu_grad %m2, %h approximate tanh : tensor<4x16xf32>
  %s2 = step.reduce_sum %d2 dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
  return %d, %s, %s2 : tensor<4x16xf32>, tensor<1x16xf32>, tensor<16xf32>
}
