func.func @mul_one_rhs(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = step.constant dense<1.0> : tensor<4xf32>
  %0 = step.mul %x, %one : tensor<4xf32>
  return %0 : tensor<4xf32>
}
