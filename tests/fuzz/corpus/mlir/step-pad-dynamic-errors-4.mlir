func.func @forward(%x: tensor<4x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]},
                   %w: tensor<8xf32> {step.kind = "param", step.name = "w"})
    -> tensor<4x8xf32> attributes {step.symbols = {T = 64 : i64}} {
  %o = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x?xf32>, tensor<8xf32>, tensor<8xf32>
  return %o : tensor<4x8xf32>
}
