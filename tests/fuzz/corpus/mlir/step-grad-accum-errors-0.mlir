func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"},
                   %n: tensor<f32> {step.kind = "input", step.name = "n"})
    -> tensor<f32> {
  %l = step.reduce_sum %w dims = [0] : tensor<2xf32> -> tensor<f32>
  %m = step.mul %l, %n : tensor<f32>
  return %m : tensor<f32>
}
