func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]})
    -> tensor<?xf32> attributes {step.symbols = {T = 64 : i64}} {
  %o = step.dropout %x p = 1.0e-01 seed = 1 : tensor<?xf32>
  return %o : tensor<?xf32>
}
