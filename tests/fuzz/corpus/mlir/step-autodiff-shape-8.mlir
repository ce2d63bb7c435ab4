func.func @forward(%x: tensor<2x3xbf16> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %m = step.reduce_max %x dims = [1] : tensor<2x3xbf16> -> tensor<2xbf16>
  %c = step.cast %m : tensor<2xbf16> -> tensor<2xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
