func.func @broadcast_in_dim_c2_repeated(%x: tensor<1x1xf32>) -> tensor<2x3xf32> {
  %0 = step.broadcast_in_dim %x, dims = [1, 1] : tensor<1x1xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
