func.func @forward(%x: tensor<2x?x7xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T", ""]},
                   %y: tensor<2x?xi64> {step.kind = "input", step.name = "y", step.dims = ["", "T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %a = step.reshape %x : tensor<2x?x7xf32> -> tensor<?x7xf32>
  %b = step.reshape %y : tensor<2x?xi64> -> tensor<?xi64>
  %l = step.cross_entropy %a, %b reduction = mean : tensor<?x7xf32>, tensor<?xi64> -> tensor<f32>
  return %l : tensor<f32>
}
