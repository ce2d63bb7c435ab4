func.func @gelu_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = step.gelu %x approximate none : tensor<4xi32>
  return %0 : tensor<4xi32>
}
