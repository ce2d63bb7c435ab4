func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %h = step.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %i = step.cast %x : tensor<4xf32> -> tensor<4xi32>
  %j = step.cast %i : tensor<4xi32> -> tensor<4xbf16>
  %s = step.mul %h, %j : tensor<4xbf16>
  %f = step.cast %s : tensor<4xbf16> -> tensor<4xf32>
  %l = step.reduce_sum %f dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
