func.func @bias_relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %m = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = step.add %m, %bb : tensor<4x16xf32>
  %r = step.relu %s : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
