func.func @adamw_update_c3_eps(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  %0:3 = step.adamw_update %p, %p, %p, %p, %t, %lr {eps = 0.0 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  return %0#0 : tensor<8xf32>
}
