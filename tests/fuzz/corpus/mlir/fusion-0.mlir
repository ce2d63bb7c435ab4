func.func @loop(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %r = step.fusion "loop" (%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%x: tensor<4x8xf32>, %bias: tensor<8xf32>):
    %bb = step.broadcast_in_dim %bias, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %s = step.add %x, %bb : tensor<4x8xf32>
    %t = step.relu %s : tensor<4x8xf32>
    %c = step.cast %t : tensor<4x8xf32> -> tensor<4x8xbf16>
    step.yield %c : tensor<4x8xbf16>
  }
  return %r : tensor<4x8xbf16>
}

func.func @reduction_two_results(%a: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = step.fusion "reduction" (%a) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4x8xf32>):
    %m = step.mul %x, %x : tensor<4x8xf32>
    %s = step.reduce_sum %m dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %q = step.rsqrt %s : tensor<4xf32>
    step.yield %s, %q : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
