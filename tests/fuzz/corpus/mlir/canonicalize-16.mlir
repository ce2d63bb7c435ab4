func.func @div_one_by_x(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = step.constant dense<1.0> : tensor<3xf32>
  %0 = step.div %one, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}
