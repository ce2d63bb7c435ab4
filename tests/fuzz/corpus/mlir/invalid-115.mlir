func.func @iota_c1_rank0() -> tensor<i64> {
  %0 = step.iota dim = 0 : tensor<i64>
  return %0 : tensor<i64>
}
