func.func @forward(%q: tensor<2x4x8xf32> {step.kind = "param", step.name = "q"},
                   %k: tensor<2x6x8xf32> {step.kind = "param", step.name = "k"},
                   %v: tensor<2x6x5xf32> {step.kind = "param", step.name = "v"})
    -> tensor<f32> {
  %o = step.attention %q, %k, %v causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  %l = step.reduce_sum %o dims = [0, 1, 2] : tensor<2x4x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}
