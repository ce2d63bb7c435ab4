func.func @f(%x: tensor<4x4xf32>) -> (tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>) {
  %e = step.exp %x : tensor<4x4xf32>
  %r = step.reshape %e : tensor<4x4xf32> -> tensor<16xf32>
  %s = step.stop_gradient %r : tensor<16xf32>
  %t = step.tanh %s : tensor<16xf32>
  %c = step.reshape %x : tensor<4x4xf32> -> tensor<16xf32>
  return %t, %e, %c : tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>
}
