// RUN: step-opt %s -split-input-file --step-fuse | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse="epilogues=false" | FileCheck %s --check-prefix=NOEPI

// matmul + bias + ReLU: one matmul fusion (a cuBLASLt call with the
// RELU_BIAS epilogue).
// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[F:.+]] = step.fusion "matmul"(%arg0, %arg1, %arg2) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.matmul
// CHECK-NEXT: step.broadcast_in_dim %{{.+}}, dims = [1]
// CHECK-NEXT: step.add
// CHECK-NEXT: step.relu
// CHECK-NEXT: step.yield
// CHECK: return %[[F]]
// NOEPI-LABEL: func.func @bias_relu
// NOEPI: step.matmul
// NOEPI-NEXT: step.fusion "loop"
func.func @bias_relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %m = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = step.add %m, %bb : tensor<4x16xf32>
  %r = step.relu %s : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// When the pre-activation is also needed (a backward pass reads it), only
// the bias is folded; the activation is a loop fusion of its own... of one
// op, so it stays a plain relu.
// CHECK-LABEL: func.func @bias_only
// CHECK: %[[F:.+]] = step.fusion "matmul"
// CHECK: step.add
// CHECK-NOT: step.relu
// CHECK: step.yield
// CHECK: step.relu %[[F]]
func.func @bias_only(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = step.add %bb, %m : tensor<4x16xf32>
  %r = step.relu %s : tensor<4x16xf32>
  return %r, %s : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// GELU folds only in its tanh form (cuBLASLt's GELU epilogue); the erf
// form is left to a loop fusion.
// CHECK-LABEL: func.func @gelu_forms
// CHECK: %[[E:.+]] = step.fusion "matmul"
// CHECK-NOT: step.gelu
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: step.gelu %[[E]] approximate none
// CHECK: step.fusion "matmul"
// CHECK: step.gelu %{{.+}} approximate tanh
// CHECK-NEXT: step.yield
func.func @gelu_forms(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = step.add %m, %bb : tensor<4x16xf32>
  %g = step.gelu %s approximate tanh : tensor<4x16xf32>
  %m2 = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s2 = step.add %m2, %bb : tensor<4x16xf32>
  %g2 = step.gelu %s2 approximate none : tensor<4x16xf32>
  return %g, %g2 : tensor<4x16xf32>, tensor<4x16xf32>
}
