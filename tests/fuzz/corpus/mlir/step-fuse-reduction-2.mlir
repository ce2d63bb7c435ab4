func.func @center(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = step.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %c = step.sub %x, %mb : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}
