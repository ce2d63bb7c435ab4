func.func @add_nonzero_splat(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = step.constant dense<1.0> : tensor<3xf32>
  %0 = step.add %x, %one : tensor<3xf32>
  return %0 : tensor<3xf32>
}
