func.func @forward(%a: tensor<2x3xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4x3xf32> {step.kind = "input", step.name = "b"},
                   %c: tensor<1x3xf32> {step.kind = "param", step.name = "c"}) -> tensor<f32> {
  %s = step.concat %a, %b, %c dim = 0 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<1x3xf32> -> tensor<7x3xf32>
  %l = step.reduce_sum %s dims = [0, 1] : tensor<7x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
