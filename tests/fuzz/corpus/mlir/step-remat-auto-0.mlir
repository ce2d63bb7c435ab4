func.func @train_step(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"},
                      %w: tensor<8x8xf32> {step.kind = "param", step.name = "w"},
                      %b: tensor<8xf32> {step.kind = "param", step.name = "b"})
    -> (tensor<f32>, tensor<4x8xf32>) {
  %h = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = step.mul %h, %bb : tensor<4x8xf32>
  %t = step.tanh %y : tensor<4x8xf32>
  %loss = step.reduce_sum %t dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<4x8xf32>
  %t2 = step.mul %t, %t : tensor<4x8xf32>
  %dt = step.sub %one, %t2 : tensor<4x8xf32>
  %dh = step.mul %dt, %bb : tensor<4x8xf32>
  return %loss, %dh : tensor<f32>, tensor<4x8xf32>
}
