func.func @concat_c2_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<5x3xf32> {
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
