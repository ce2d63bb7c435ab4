func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<4x2xf32>
  %z = step.add %y, %bb : tensor<4x2xf32>
  %l = step.reduce_sum %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
