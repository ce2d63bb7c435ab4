func.func @reduce_sum_c1_negative(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = step.reduce_sum %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
