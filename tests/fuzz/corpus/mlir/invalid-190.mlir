func.func @parse_missing_dims_keyword(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = step.broadcast_in_dim %x, [1] : tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
