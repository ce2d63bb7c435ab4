func.func @budget(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = step.exp %x : tensor<16xf32>
  %b = step.tanh %a : tensor<16xf32>
  %c = step.neg %b : tensor<16xf32>
  %d = step.exp %c : tensor<16xf32>
  %e = step.tanh %d : tensor<16xf32>
  return %e : tensor<16xf32>
}
