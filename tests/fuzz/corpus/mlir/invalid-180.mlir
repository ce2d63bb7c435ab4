func.func @attention_c1_rank1(%q: tensor<8xf32>) -> tensor<8xf32> {
  %0 = step.attention %q, %q, %q : tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
