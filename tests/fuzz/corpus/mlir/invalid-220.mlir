func.func @sgd_update_c2_lr(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<1xf32>) -> tensor<8xf32> {
  %0 = step.sgd_update %p, %p, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<1xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
