func.func @add_zero_rhs(%x: tensor<3xf32>) -> tensor<3xf32> {
  %zero = step.constant dense<0.0> : tensor<3xf32>
  %0 = step.add %x, %zero : tensor<3xf32>
  return %0 : tensor<3xf32>
}
