func.func @attention_c3_key_length(%q: tensor<16x8xf32>, %k: tensor<12x8xf32>, %v: tensor<10x8xf32>) -> tensor<16x8xf32> {
  %0 = step.attention %q, %k, %v : tensor<16x8xf32>, tensor<12x8xf32>, tensor<10x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
