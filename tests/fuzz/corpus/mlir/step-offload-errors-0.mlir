func.func @train_step(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32>, tensor<4x8xf32>) {
  %t = step.tanh %x : tensor<4x8xf32>
  %e = step.exp %t : tensor<4x8xf32>
  %loss = step.reduce_sum %e dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = step.mul %t, %e : tensor<4x8xf32>
  return %loss, %g : tensor<f32>, tensor<4x8xf32>
}
