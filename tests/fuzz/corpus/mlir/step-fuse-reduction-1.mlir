func.func @siblings(%dy: tensor<4x8xf32>, %xhat: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = step.reduce_mean %dy dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %p = step.mul %dy, %xhat : tensor<4x8xf32>
  %b = step.reduce_mean %p dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
