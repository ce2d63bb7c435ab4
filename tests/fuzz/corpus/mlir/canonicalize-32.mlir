func.func @reshape_of_reshape(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
  %0 = step.reshape %x : tensor<2x6xf32> -> tensor<12xf32>
  %1 = step.reshape %0 : tensor<12xf32> -> tensor<3x4xf32>
  return %1 : tensor<3x4xf32>
}
