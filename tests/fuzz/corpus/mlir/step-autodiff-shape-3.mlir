func.func @forward(%x: tensor<6x8xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %s = step.slice %x start = [1, 0] limit = [6, 8] strides = [1, 3] : tensor<6x8xf32> -> tensor<5x3xf32>
  %l = step.reduce_sum %s dims = [0, 1] : tensor<5x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
