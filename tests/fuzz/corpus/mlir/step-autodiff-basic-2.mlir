func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"})
    -> tensor<f32> {
  %c = step.stop_gradient %w : tensor<2xf32>
  %y = step.mul %w, %c : tensor<2xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
