func.func @mul_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = step.constant dense<0.0> : tensor<4xf32>
  %0 = step.mul %x, %zero : tensor<4xf32>
  return %0 : tensor<4xf32>
}
