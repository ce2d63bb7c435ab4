// step-opt reports malformed IR with file:line:col and exits 1.
// RUN: not step-opt %s 2>&1 | FileCheck %s

// CHECK: step-opt-errors.mlir:[[@LINE+2]]:8: error: 'step.matmul' op contracting dims differ
func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = step.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
