func.func @forward(%w1: tensor<5x3xf32> {step.kind = "param", step.name = "w1"},
                   %w2: tensor<3x2xf32> {step.kind = "param", step.name = "w2"},
                   %x: tensor<4x5xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %h = step.matmul %x, %w1 : tensor<4x5xf32>, tensor<5x3xf32> -> tensor<4x3xf32>
  %r = step.tanh %h : tensor<4x3xf32>
  %y = step.matmul %r, %w2 : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
