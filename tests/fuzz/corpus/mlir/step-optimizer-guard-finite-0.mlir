func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<2x2xf32>
  %s = step.add %m, %bb : tensor<2x2xf32>
  %l = step.reduce_mean %s dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
