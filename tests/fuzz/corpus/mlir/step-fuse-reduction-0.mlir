func.func @rms(%x: tensor<4x8xf32>, %eps: tensor<4xf32>) -> tensor<4xf32> {
  %sq = step.mul %x, %x : tensor<4x8xf32>
  %s = step.reduce_sum %sq dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %a = step.add %s, %eps : tensor<4xf32>
  %r = step.rsqrt %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
