func.func @reduce_sum_no_dims_keepdim(%x: tensor<3xi64>) -> tensor<3xi64> {
  %0 = step.reduce_sum %x dims = [] keepdim : tensor<3xi64> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}
