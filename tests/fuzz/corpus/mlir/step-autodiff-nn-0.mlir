func.func @forward(%x: tensor<4x10xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<4x10xf32> {step.kind = "input", step.name = "w"})
    -> tensor<f32> {
  %y = step.softmax %x dim = 1 : tensor<4x10xf32>
  %p = step.mul %y, %w : tensor<4x10xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<4x10xf32> -> tensor<f32>
  return %l : tensor<f32>
}
