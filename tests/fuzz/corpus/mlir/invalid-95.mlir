func.func @transpose_c1_range(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = step.transpose %x, perm = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
