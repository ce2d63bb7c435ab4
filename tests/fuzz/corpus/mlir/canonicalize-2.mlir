func.func @add_negative_zero(%x: tensor<3xf16>) -> tensor<3xf16> {
  %zero = step.constant dense<-0.0> : tensor<3xf16>
  %0 = step.add %x, %zero : tensor<3xf16>
  return %0 : tensor<3xf16>
}
