func.func @matmul_c2(%a: tensor<2x3x8xf32>, %b: tensor<8xf32>) -> tensor<2x3xf32> {
  %0 = step.matmul %a, %b : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
