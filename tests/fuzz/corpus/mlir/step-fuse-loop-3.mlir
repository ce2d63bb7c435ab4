func.func @single(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = step.exp %x : tensor<16xf32>
  return %e : tensor<16xf32>
}
