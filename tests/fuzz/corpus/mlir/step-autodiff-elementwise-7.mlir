func.func @forward(%a: tensor<4xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "param", step.name = "b"}) -> tensor<f32> {
  %m = step.pow %a, %b : tensor<4xf32>
  %l = step.reduce_sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
