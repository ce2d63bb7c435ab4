func.func @forward(%x: tensor<4x4xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<4x4xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = step.softmax %m dim = 1 : tensor<4x4xf32>
  %e = step.exp %m : tensor<4x4xf32>
  %r = step.add %x, %m : tensor<4x4xf32>
  %g = step.gelu %m approximate tanh : tensor<4x4xf32>
  %t = step.tanh %m {step.amp = "f32"} : tensor<4x4xf32>
  %a = step.add %s, %e : tensor<4x4xf32>
  %b = step.add %a, %r : tensor<4x4xf32>
  %c = step.add %b, %g : tensor<4x4xf32>
  %d = step.add %c, %t : tensor<4x4xf32>
  %l = step.reduce_sum %d dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
