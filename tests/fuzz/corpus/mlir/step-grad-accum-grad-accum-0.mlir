func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}, tensor<4x3xf32> {step.name = "out1"}) {
  %xw = step.broadcast_in_dim %x, dims = [0, 1] : tensor<4x3xf32> -> tensor<4x3xf32>
  %ws = step.reduce_sum %w dims = [1] : tensor<3x2xf32> -> tensor<3xf32>
  %wb = step.broadcast_in_dim %ws, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %p = step.mul %xw, %wb : tensor<4x3xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4x3xf32>
}
