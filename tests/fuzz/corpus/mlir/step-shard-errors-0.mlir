func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
