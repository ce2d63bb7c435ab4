func.func @sgd_update_negative_weight_decay(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  %0 = step.sgd_update %p, %p, %t, %lr {weight_decay = -1.0 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
