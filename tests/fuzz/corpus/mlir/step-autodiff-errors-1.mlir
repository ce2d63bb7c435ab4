func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}) {
  return
}
