func.func @fusion_c1(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = step.fusion "tiles" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = step.exp %a : tensor<4xf32>
    step.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
