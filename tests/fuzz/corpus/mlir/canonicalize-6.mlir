func.func @add_zero_refines_type(%x: tensor<?xf32>) -> tensor<3xf32> {
  %zero = step.constant dense<0.0> : tensor<3xf32>
  %0 = step.add %x, %zero : tensor<?xf32>, tensor<3xf32>
  return %0 : tensor<3xf32>
}
