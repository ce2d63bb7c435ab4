func.func @compare_c2(%a: tensor<4x?xf32>, %b: tensor<5x2xf32>) -> tensor<4x2xi1> {
  %0 = step.compare ge, %a, %b : tensor<4x?xf32>, tensor<5x2xf32>
  return %0 : tensor<4x2xi1>
}
