func.func @reduce_mean_c1_negative(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  %0 = step.reduce_mean %x dims = [-1] : tensor<4x8xf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}
