func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x"}) -> tensor<f32> {
  %s = step.reduce_sum %x dims = [0] : tensor<?xf32> -> tensor<f32>
  return %s : tensor<f32>
}
