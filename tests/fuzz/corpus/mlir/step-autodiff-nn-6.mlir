func.func @forward(%x: tensor<6x3xf32> {step.kind = "param", step.name = "x"},
                   %t: tensor<6xi32> {step.kind = "input", step.name = "t"})
    -> tensor<f32> {
  %c = step.cross_entropy %x, %t reduction = none : tensor<6x3xf32>, tensor<6xi32> -> tensor<6xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<6xf32> -> tensor<f32>
  return %l : tensor<f32>
}
