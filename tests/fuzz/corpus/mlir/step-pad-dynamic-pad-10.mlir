func.func @forward(%x: tensor<4x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]},
                   %g: tensor<f32> {step.kind = "param", step.name = "g"})
    -> tensor<4x?xf32> attributes {step.symbols = {T = 64 : i64}} {
  %w = step.broadcast_in_dim %g, dims = [] : tensor<f32> -> tensor<?xf32>
  %o = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x?xf32>, tensor<?xf32>, tensor<?xf32>
  return %o : tensor<4x?xf32>
}
