func.func @forward(%x: tensor<2x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %r = step.reduce_sum %x dims = [1] : tensor<2x?xf32> -> tensor<2xf32>
  %s = step.reduce_sum %r dims = [0] : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}
