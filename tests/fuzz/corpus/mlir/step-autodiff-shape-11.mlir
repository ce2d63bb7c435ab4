func.func @forward(%x: tensor<2x16x8xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<2x16x4xf32> {step.kind = "param", step.name = "w"}) -> tensor<f32> {
  %y = step.matmul %x, %w transpose_a : tensor<2x16x8xf32>, tensor<2x16x4xf32> -> tensor<2x8x4xf32>
  %l = step.reduce_sum %y dims = [0, 1, 2] : tensor<2x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
