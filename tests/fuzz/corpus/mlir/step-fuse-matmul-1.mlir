func.func @bias_only(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = step.add %bb, %m : tensor<4x16xf32>
  %r = step.relu %s : tensor<4x16xf32>
  return %r, %s : tensor<4x16xf32>, tensor<4x16xf32>
}
