func.func @check_finite_c2_generic(%a: tensor<4xf32>, %i: tensor<3xi1>) -> tensor<i1> {
  %0 = "step.check_finite"(%a, %i) : (tensor<4xf32>, tensor<3xi1>) -> tensor<i1>
  return %0 : tensor<i1>
}
