func.func @forward(%x: tensor<2x2xf16> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf16> {step.kind = "param", step.name = "w"})
    -> (tensor<f16> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf16>, tensor<2x2xf16> -> tensor<2x2xf16>
  %l = step.reduce_mean %m dims = [0, 1] : tensor<2x2xf16> -> tensor<f16>
  return %l : tensor<f16>
}
