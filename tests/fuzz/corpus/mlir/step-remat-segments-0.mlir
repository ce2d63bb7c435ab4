func.func @train_step(%x: tensor<64x8xf32> {step.kind = "input", step.name = "x"},
                      %w1: tensor<8x32xf32> {step.kind = "param", step.name = "w1"},
                      %w2: tensor<32x8xf32> {step.kind = "param", step.name = "w2"},
                      %w3: tensor<8x32xf32> {step.kind = "param", step.name = "w3"},
                      %w4: tensor<32x8xf32> {step.kind = "param", step.name = "w4"})
    -> (tensor<f32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32x8xf32>) {
  %h1 = step.matmul %x, %w1 : tensor<64x8xf32>, tensor<8x32xf32> -> tensor<64x32xf32>
  %a1 = step.tanh %h1 : tensor<64x32xf32>
  %r1 = step.matmul %a1, %w2 : tensor<64x32xf32>, tensor<32x8xf32> -> tensor<64x8xf32>
  %h2 = step.matmul %r1, %w3 : tensor<64x8xf32>, tensor<8x32xf32> -> tensor<64x32xf32>
  %a2 = step.tanh %h2 : tensor<64x32xf32>
  %r2 = step.matmul %a2, %w4 : tensor<64x32xf32>, tensor<32x8xf32> -> tensor<64x8xf32>
  %loss = step.reduce_sum %r2 dims = [0, 1] : tensor<64x8xf32> -> tensor<f32>
  %dr2 = step.constant dense<1.0> : tensor<64x8xf32>
  %one = step.constant dense<1.0> : tensor<64x32xf32>
  %dw4 = step.matmul %a2, %dr2 transpose_a : tensor<64x32xf32>, tensor<64x8xf32> -> tensor<32x8xf32>
  %da2 = step.matmul %dr2, %w4 transpose_b : tensor<64x8xf32>, tensor<32x8xf32> -> tensor<64x32xf32>
  %sq2 = step.mul %a2, %a2 : tensor<64x32xf32>
  %g2 = step.sub %one, %sq2 : tensor<64x32xf32>
  %dh2 = step.mul %da2, %g2 : tensor<64x32xf32>
  %dw3 = step.matmul %r1, %dh2 transpose_a : tensor<64x8xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  %dr1 = step.matmul %dh2, %w3 transpose_b : tensor<64x32xf32>, tensor<8x32xf32> -> tensor<64x8xf32>
  %da1 = step.matmul %dr1, %w2 transpose_b : tensor<64x8xf32>, tensor<32x8xf32> -> tensor<64x32xf32>
  %dw2 = step.matmul %a1, %dr1 transpose_a : tensor<64x32xf32>, tensor<64x8xf32> -> tensor<32x8xf32>
  %sq1 = step.mul %a1, %a1 : tensor<64x32xf32>
  %g1 = step.sub %one, %sq1 : tensor<64x32xf32>
  %dh1 = step.mul %da1, %g1 : tensor<64x32xf32>
  %dw1 = step.matmul %x, %dh1 transpose_a : tensor<64x8xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  return %loss, %dw1, %dw2, %dw3, %dw4 : tensor<f32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32x8xf32>
}
