func.func @fusion_c5_domain(%x: tensor<4xf32>, %y: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %r:2 = step.fusion "loop" (%x, %y) : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<8xf32>):
    %e = step.exp %a : tensor<4xf32>
    %f = step.exp %b : tensor<8xf32>
    step.yield %e, %f : tensor<4xf32>, tensor<8xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<8xf32>
}
