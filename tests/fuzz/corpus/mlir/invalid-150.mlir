func.func @matmul_c5_transposed(%a: tensor<8x3xf32>, %b: tensor<8x4xf32>) -> tensor<3x8xf32> {
  %0 = step.matmul %a, %b transpose_a transpose_b : tensor<8x3xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}
