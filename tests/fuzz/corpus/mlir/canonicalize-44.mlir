func.func @broadcast_in_dim_of_scalar() -> tensor<2x2xi1> {
  %c = step.constant dense<true> : tensor<i1>
  %0 = step.broadcast_in_dim %c, dims = [] : tensor<i1> -> tensor<2x2xi1>
  return %0 : tensor<2x2xi1>
}
