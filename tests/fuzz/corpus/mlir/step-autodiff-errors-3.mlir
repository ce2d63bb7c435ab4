func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"},
                   %u: tensor<3xf32> {step.kind = "param", step.name = "unused"})
    -> tensor<f32> {
  %l = step.reduce_sum %w dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
