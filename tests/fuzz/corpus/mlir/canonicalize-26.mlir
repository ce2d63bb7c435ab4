func.func @cast_of_lossy_float_cast(%x: tensor<4xf16>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xf16> -> tensor<4xbf16>
  %1 = step.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
