func.func @min_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = step.min %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}
