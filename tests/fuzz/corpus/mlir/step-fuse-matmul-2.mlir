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
