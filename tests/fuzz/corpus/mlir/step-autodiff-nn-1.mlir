func.func @forward(%x: tensor<5x3xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<5x3xf32> {step.kind = "input", step.name = "w"})
    -> tensor<f32> {
  %y = step.log_softmax %x dim = 0 : tensor<5x3xf32>
  %p = step.mul %y, %w : tensor<5x3xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<5x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
