func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = step.transpose %x, perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = step.transpose %0, perm = [2, 0, 1] : tensor<4x2x3xf32> -> tensor<3x4x2xf32>
  return %1 : tensor<3x4x2xf32>
}
