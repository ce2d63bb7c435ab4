func.func @select_c1_rank(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<f32>) -> tensor<4xf32> {
  %0 = step.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<f32>
  return %0 : tensor<4xf32>
}
