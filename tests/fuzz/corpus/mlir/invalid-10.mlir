func.func @tanh_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  %0 = "step.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}
