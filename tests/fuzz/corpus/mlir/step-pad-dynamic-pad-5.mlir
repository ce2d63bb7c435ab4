func.func @forward(%x: tensor<?x4xf32> {step.kind = "input", step.name = "x", step.dims = ["T", ""]},
                   %y: tensor<?x5xf32> {step.kind = "input", step.name = "y", step.dims = ["T", ""]},
                   %w: tensor<4x5xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32>, tensor<4x5xf32>, tensor<?x5xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %g = step.matmul %x, %y transpose_a : tensor<?x4xf32>, tensor<?x5xf32> -> tensor<4x5xf32>
  %h = step.matmul %x, %w : tensor<?x4xf32>, tensor<4x5xf32> -> tensor<?x5xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %g, %h : tensor<f32>, tensor<4x5xf32>, tensor<?x5xf32>
}
