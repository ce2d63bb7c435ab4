func.func @reduce_max_c3_empty(%x: tensor<5x0xi32>) -> tensor<5xi32> {
  %r = step.reduce_max %x dims = [1] : tensor<5x0xi32> -> tensor<5xi32>
  return %r : tensor<5xi32>
}
