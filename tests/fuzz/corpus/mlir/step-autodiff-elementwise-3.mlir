func.func @forward(%x: tensor<4xf16> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %t = step.tanh %x : tensor<4xf16>
  %c = step.cast %t : tensor<4xf16> -> tensor<4xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
