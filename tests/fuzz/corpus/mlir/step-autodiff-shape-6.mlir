func.func @forward(%x: tensor<2x3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %r = step.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %m = step.reduce_mean %r dims = [0] : tensor<6xf32> -> tensor<f32>
  return %m : tensor<f32>
}
