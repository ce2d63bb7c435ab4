func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
  %e = step.exp %x : tensor<3xf32>
  %s = step.reduce_sum %e dims = [0] : tensor<3xf32> -> tensor<f32>
  return %e, %s : tensor<3xf32>, tensor<f32>
}
