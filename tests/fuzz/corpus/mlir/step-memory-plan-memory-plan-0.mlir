func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %c = step.constant dense<1.0> : tensor<64xf32>
  %a = step.add %x, %c : tensor<64xf32>
  %b = step.exp %a : tensor<64xf32>
  %d = step.exp %b : tensor<64xf32>
  return %d : tensor<64xf32>
}
