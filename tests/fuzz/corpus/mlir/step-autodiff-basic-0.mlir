func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %y = step.mul %w, %x : tensor<4xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
