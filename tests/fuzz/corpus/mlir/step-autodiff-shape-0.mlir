func.func @forward(%x: tensor<2x3x4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %t = step.transpose %x, perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %l = step.reduce_sum %t dims = [0, 1, 2] : tensor<3x4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
