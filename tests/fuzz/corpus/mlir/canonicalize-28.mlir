func.func @cast_int_float_round_trip(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = step.cast %x : tensor<4xi32> -> tensor<4xf32>
  %1 = step.cast %0 : tensor<4xf32> -> tensor<4xi32>
  return %1 : tensor<4xi32>
}
