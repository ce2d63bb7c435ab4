func.func @forward(%q: tensor<2x4x8xf32> {step.kind = "input", step.name = "q"},
                   %k: tensor<2x?x8xf32> {step.kind = "input", step.name = "k", step.dims = ["", "T", ""]})
    -> tensor<2x4x8xf32> attributes {step.symbols = {T = 64 : i64}} {
  %o = step.attention %q, %k, %k causal : tensor<2x4x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
