func.func @relu_i1(%x: tensor<4xi1>) -> tensor<4xi1> {
  %0 = step.relu %x : tensor<4xi1>
  return %0 : tensor<4xi1>
}
