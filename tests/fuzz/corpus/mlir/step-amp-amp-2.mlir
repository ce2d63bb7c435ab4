func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %c = step.constant dense<0.125> : tensor<2x2xf32>
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = step.mul %m, %c : tensor<2x2xf32>
  %l = step.reduce_mean %s dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
