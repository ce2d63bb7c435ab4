func.func @train_step(%x: tensor<64x16xf32> {step.kind = "input", step.name = "x"},
                      %w1: tensor<16x16xf32> {step.kind = "param", step.name = "w1"},
                      %w2: tensor<16x256xf32> {step.kind = "param", step.name = "w2"})
    -> (tensor<f32>, tensor<16x256xf32>, tensor<64x16xf32>) {
  %h1 = step.matmul %x, %w1 : tensor<64x16xf32>, tensor<16x16xf32> -> tensor<64x16xf32>
  %t1 = step.tanh %h1 : tensor<64x16xf32>
  %h2 = step.matmul %t1, %w2 : tensor<64x16xf32>, tensor<16x256xf32> -> tensor<64x256xf32>
  %t2 = step.tanh %h2 : tensor<64x256xf32>
  %loss = step.reduce_sum %t2 dims = [0, 1] : tensor<64x256xf32> -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<64x256xf32>
  %sq2 = step.mul %t2, %t2 : tensor<64x256xf32>
  %d2 = step.sub %one, %sq2 : tensor<64x256xf32>
  %dt1 = step.matmul %d2, %w2 transpose_b : tensor<64x256xf32>, tensor<16x256xf32> -> tensor<64x16xf32>
  %dw2 = step.matmul %t1, %d2 transpose_a : tensor<64x16xf32>, tensor<64x256xf32> -> tensor<16x256xf32>
  return %loss, %dw2, %dt1 : tensor<f32>, tensor<16x256xf32>, tensor<64x16xf32>
}
