func.func @forward(%x: tensor<2x3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %m = step.reduce_max %x dims = [1] keepdim : tensor<2x3xf32> -> tensor<2x1xf32>
  %l = step.reduce_sum %m dims = [0, 1] : tensor<2x1xf32> -> tensor<f32>
  return %l : tensor<f32>
}
