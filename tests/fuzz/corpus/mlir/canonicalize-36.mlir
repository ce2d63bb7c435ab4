func.func @reshape_not_foldable(%x: tensor<2x6xf32>) -> tensor<6x2xf32> {
  %0 = step.reshape %x : tensor<2x6xf32> -> tensor<6x2xf32>
  return %0 : tensor<6x2xf32>
}
