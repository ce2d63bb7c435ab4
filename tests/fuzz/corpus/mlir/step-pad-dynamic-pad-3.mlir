func.func @forward(%x: tensor<2x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %m = step.reduce_mean %x dims = [0, 1] : tensor<2x?xf32> -> tensor<f32>
  return %m : tensor<f32>
}
