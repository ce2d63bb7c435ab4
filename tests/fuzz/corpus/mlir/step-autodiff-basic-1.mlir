func.func @forward(%w: tensor<3xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}, tensor<3xf32> {step.name = "out1"}) {
  %s = step.mul %w, %w : tensor<3xf32>
  %l = step.reduce_sum %s dims = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %s : tensor<f32>, tensor<3xf32>
}
