func.func @forward(%x: tensor<3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %b = step.broadcast_in_dim %x, dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %l = step.reduce_sum %b dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
