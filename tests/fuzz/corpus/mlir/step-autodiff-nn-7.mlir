func.func @forward(%x: tensor<4x8xf32> {step.kind = "param", step.name = "x"})
    -> tensor<f32> {
  %d = step.dropout %x p = 3.0e-01 seed = 42 : tensor<4x8xf32>
  %l = step.reduce_sum %d dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
