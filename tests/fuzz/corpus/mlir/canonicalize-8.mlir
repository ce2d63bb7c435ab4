func.func @sub_zero_integer(%x: tensor<i64>) -> tensor<i64> {
  %zero = step.constant dense<0> : tensor<i64>
  %0 = step.sub %x, %zero : tensor<i64>
  return %0 : tensor<i64>
}
