func.func @forward(%x: tensor<8x16xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<4x16xf32> {step.kind = "param", step.name = "w"}) -> tensor<f32> {
  %y = step.matmul %x, %w transpose_b : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x4xf32>
  %l = step.reduce_sum %y dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
