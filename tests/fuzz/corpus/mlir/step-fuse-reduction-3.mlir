func.func @across_matmul(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4xf32> {
  %a = step.mul %x, %x : tensor<4x4xf32>
  %b = step.exp %a : tensor<4x4xf32>
  %m = step.matmul %b, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = step.tanh %m : tensor<4x4xf32>
  %s = step.reduce_sum %t dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}
