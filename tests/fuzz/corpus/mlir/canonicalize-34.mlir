func.func @reshape_of_reshape_identity(%x: tensor<2x6xi1>) -> tensor<2x6xi1> {
  %0 = step.reshape %x : tensor<2x6xi1> -> tensor<12xi1>
  %1 = step.reshape %0 : tensor<12xi1> -> tensor<2x6xi1>
  return %1 : tensor<2x6xi1>
}
