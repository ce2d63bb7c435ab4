func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]},
                   %y: tensor<?xf32> {step.kind = "input", step.name = "y", step.dims = ["U"]})
    -> tensor<?xf32> attributes {step.symbols = {T = 64 : i64, U = 64 : i64}} {
  %o = step.add %x, %y : tensor<?xf32>
  return %o : tensor<?xf32>
}
