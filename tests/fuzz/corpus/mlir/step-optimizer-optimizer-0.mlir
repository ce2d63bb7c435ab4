func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4xf32> {step.kind = "input", step.name = "x"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"})
    -> (tensor<f32> {step.name = "loss"}) {
  %y = step.mul %w, %x : tensor<4xf32>
  %l1 = step.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  %bb = step.mul %b, %b : tensor<2xf32>
  %l2 = step.reduce_sum %bb dims = [0] : tensor<2xf32> -> tensor<f32>
  %l = step.add %l1, %l2 : tensor<f32>
  return %l : tensor<f32>
}
