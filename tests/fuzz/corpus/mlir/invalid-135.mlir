func.func @softmax_c1_negative(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %0 = step.softmax %x dim = -1 : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}
