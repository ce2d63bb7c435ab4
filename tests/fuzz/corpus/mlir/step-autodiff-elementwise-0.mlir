func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %e = step.exp %x : tensor<4xf32>
  %l = step.reduce_sum %e dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
