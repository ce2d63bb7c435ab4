func.func @reshape_c2(%x: tensor<4x8xf32>) -> tensor<30xf32> {
  %0 = step.reshape %x : tensor<4x8xf32> -> tensor<30xf32>
  return %0 : tensor<30xf32>
}
