func.func @sqrt_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = step.sqrt %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}
