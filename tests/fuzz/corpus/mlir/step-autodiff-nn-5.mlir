func.func @forward(%x: tensor<8x5xf32> {step.kind = "param", step.name = "x"},
                   %t: tensor<8xi64> {step.kind = "input", step.name = "t"})
    -> tensor<f32> {
  %l = step.cross_entropy %x, %t reduction = mean ignore_index = 3 : tensor<8x5xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}
