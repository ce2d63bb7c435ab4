func.func @causal_mask(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %r = step.iota dim = 0 : tensor<4x4xi64>
  %k = step.iota dim = 1 : tensor<4x4xi64>
  %m = step.compare gt, %k, %r : tensor<4x4xi64>
  %x = step.select %m, %a, %b : tensor<4x4xi1>, tensor<4x4xf32>
  %y = step.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %z = step.select %m, %y, %c : tensor<4x4xi1>, tensor<4x4xf32>
  return %x, %z : tensor<4x4xf32>, tensor<4x4xf32>
}
