func.func @multi_output(%x: tensor<16xf32>, %y: tensor<16xf32>, %m: tensor<4x4xf32>) -> (tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>) {
  %s = step.add %x, %y : tensor<16xf32>
  %t = step.tanh %s : tensor<16xf32>
  %mm = step.matmul %m, %m : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %t, %mm, %s : tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>
}
