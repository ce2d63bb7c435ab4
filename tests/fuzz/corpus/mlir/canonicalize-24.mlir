func.func @cast_of_bool_cast(%x: tensor<4xi1>) -> tensor<4xi32> {
  %0 = step.cast %x : tensor<4xi1> -> tensor<4xbf16>
  %1 = step.cast %0 : tensor<4xbf16> -> tensor<4xi32>
  return %1 : tensor<4xi32>
}
