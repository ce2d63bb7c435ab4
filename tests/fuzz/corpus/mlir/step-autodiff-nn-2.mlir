func.func @forward(%x: tensor<2x3x8xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<3x8xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<3x8xf32> {step.kind = "param", step.name = "b"})
    -> tensor<f32> {
  %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>
  %l = step.reduce_sum %y dims = [0, 1, 2] : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
