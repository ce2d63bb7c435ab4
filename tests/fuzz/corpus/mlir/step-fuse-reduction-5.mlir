func.func @view_leaves(%x: tensor<4x8xf32>, %s: tensor<4x8xf32>, %w: tensor<32x32xf32>) -> tensor<1x32xf32> {
  %a = step.mul %x, %s : tensor<4x8xf32>
  %p = step.softmax %a dim = 1 : tensor<4x8xf32>
  %r = step.reshape %p : tensor<4x8xf32> -> tensor<1x32xf32>
  %m = step.matmul %r, %w : tensor<1x32xf32>, tensor<32x32xf32> -> tensor<1x32xf32>
  return %m : tensor<1x32xf32>
}
