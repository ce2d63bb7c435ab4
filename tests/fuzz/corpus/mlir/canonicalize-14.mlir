func.func @div_one(%x: tensor<3xf16>) -> tensor<3xf16> {
  %one = step.constant dense<1.0> : tensor<3xf16>
  %0 = step.div %x, %one : tensor<3xf16>
  return %0 : tensor<3xf16>
}
