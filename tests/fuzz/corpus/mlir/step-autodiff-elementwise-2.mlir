func.func @forward(%a: tensor<4xf32> {step.kind = "input", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "param", step.name = "b"}) -> tensor<f32> {
  %q = step.div %a, %b : tensor<4xf32>
  %l = step.reduce_sum %q dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
