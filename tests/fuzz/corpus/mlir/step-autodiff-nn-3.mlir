func.func @forward(%x: tensor<4x6xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<6xf32> {step.kind = "input", step.name = "w"},
                   %b: tensor<6xf32> {step.kind = "param", step.name = "b"})
    -> tensor<f32> {
  %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>
  %l = step.reduce_sum %y dims = [0, 1] : tensor<4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}
