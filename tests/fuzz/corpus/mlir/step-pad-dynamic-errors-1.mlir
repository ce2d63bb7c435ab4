func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]})
    -> tensor<f32> attributes {step.symbols = {T = 8 : i64}} {
  %s = step.reduce_sum %x dims = [0] : tensor<?xf32> -> tensor<f32>
  return %s : tensor<f32>
}
