func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %l = step.reduce_mean %m dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
