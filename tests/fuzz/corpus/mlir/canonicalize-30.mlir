func.func @cast_to_bool_round_trip(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xf32> -> tensor<4xi1>
  %1 = step.cast %0 : tensor<4xi1> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
