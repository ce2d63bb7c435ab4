func.func @reduce_max_c1_negative(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  %0 = step.reduce_max %x dims = [-1] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
