func.func @broadcast_in_dim_expands(%x: tensor<1x3xf32>) -> tensor<5x3xf32> {
  %0 = step.broadcast_in_dim %x, dims = [0, 1] : tensor<1x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
