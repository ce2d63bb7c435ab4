func.func @concat_two_inputs(%x: tensor<2xf32>) -> tensor<4xf32> {
  %0 = step.concat %x, %x dim = 0 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
