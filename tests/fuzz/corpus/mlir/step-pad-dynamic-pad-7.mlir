func.func @forward(%q: tensor<1x?x8xf32> {step.kind = "input", step.name = "q", step.dims = ["", "T", ""]})
    -> (tensor<f32>, tensor<?xi64>, tensor<1x?x8xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %i = step.iota dim = 0 {step.dims = ["T"]} : tensor<?xi64>
  %o = step.attention %q, %q, %q causal : tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32> -> tensor<1x?x8xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %i, %o : tensor<f32>, tensor<?xi64>, tensor<1x?x8xf32>
}
