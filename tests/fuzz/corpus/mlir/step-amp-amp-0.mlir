func.func @forward(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"},
                   %w1: tensor<8x16xf32> {step.kind = "param", step.name = "w1"},
                   %b1: tensor<16xf32> {step.kind = "param", step.name = "b1"},
                   %w2: tensor<16x3xf32> {step.kind = "param", step.name = "w2"},
                   %y: tensor<4xi64> {step.kind = "input", step.name = "y"})
    -> (tensor<f32> {step.name = "loss"}, tensor<4x3xf32> {step.name = "logits"}) {
  %m1 = step.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b1, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %a = step.add %m1, %bb : tensor<4x16xf32>
  %r = step.relu %a : tensor<4x16xf32>
  %m2 = step.matmul %r, %w2 : tensor<4x16xf32>, tensor<16x3xf32> -> tensor<4x3xf32>
  %l = step.cross_entropy %m2, %y reduction = mean : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  return %l, %m2 : tensor<f32>, tensor<4x3xf32>
}
