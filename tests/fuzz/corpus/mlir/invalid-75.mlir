func.func @cast_c1(%x: tensor<4x8xf32>) -> tensor<8x4xbf16> {
  %0 = step.cast %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return %0 : tensor<8x4xbf16>
}
