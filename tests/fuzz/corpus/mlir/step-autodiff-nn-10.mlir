func.func @forward(%x: tensor<4x8xbf16> {step.kind = "param", step.name = "x"})
    -> tensor<f32> {
  %y = step.softmax %x dim = 0 : tensor<4x8xbf16>
  %c = step.cast %y : tensor<4x8xbf16> -> tensor<4x8xf32>
  %l = step.reduce_sum %c dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
