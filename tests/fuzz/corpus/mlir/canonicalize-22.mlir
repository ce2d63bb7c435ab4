func.func @cast_widening_round_trip(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = step.cast %x : tensor<4xf16> -> tensor<4xf32>
  %1 = step.cast %0 : tensor<4xf32> -> tensor<4xf16>
  return %1 : tensor<4xf16>
}
