func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %s = step.slice %x start = [1] limit = [4] strides = [1] : tensor<?xf32> -> tensor<3xf32>
  %r = step.reduce_sum %s dims = [0] : tensor<3xf32> -> tensor<f32>
  return %r : tensor<f32>
}
