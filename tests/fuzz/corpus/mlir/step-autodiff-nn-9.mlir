func.func @forward(%q: tensor<4x8xf32> {step.kind = "input", step.name = "q"},
                   %k: tensor<6x8xf32> {step.kind = "input", step.name = "k"},
                   %v: tensor<6x5xf32> {step.kind = "param", step.name = "v"})
    -> tensor<f32> {
  %o = step.attention %q, %k, %v scale = 2.5e-01 : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
  %l = step.reduce_sum %o dims = [0, 1] : tensor<4x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}
