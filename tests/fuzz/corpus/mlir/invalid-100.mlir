func.func @slice_c2_limit_past_end(%x: tensor<4x8xf32>) -> tensor<4x9xf32> {
  %0 = step.slice %x start = [0, 0] limit = [4, 9] strides = [1, 1] : tensor<4x8xf32> -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}
