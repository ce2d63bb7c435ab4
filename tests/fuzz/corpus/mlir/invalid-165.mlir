func.func @embedding_result_type(%i: tensor<4xi32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = step.embedding %i, %w : tensor<4xi32>, tensor<16x8xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
