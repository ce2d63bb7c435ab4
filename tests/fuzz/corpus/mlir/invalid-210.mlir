func.func @cross_entropy_grad_c2_mean_not_scalar(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<4xf32>) -> tensor<4x10xf32> {
  %0 = step.cross_entropy_grad %l, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32> -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}
