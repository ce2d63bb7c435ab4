func.func @forward(%i: tensor<2x3xi64> {step.kind = "input", step.name = "i"},
                   %w: tensor<5x4xf32> {step.kind = "param", step.name = "w"})
    -> tensor<f32> {
  %e = step.embedding %i, %w : tensor<2x3xi64>, tensor<5x4xf32> -> tensor<2x3x4xf32>
  %l = step.reduce_sum %e dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
