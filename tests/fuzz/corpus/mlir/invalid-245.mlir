func.func @offload_in_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = step.fusion "loop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %h = step.offload %a : tensor<4xf32>
    %b = step.reload %h : tensor<4xf32>
    step.yield %b : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
