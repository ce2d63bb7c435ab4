func.func @reshape_c2_overflow(%x: tensor<4294967296x4294967296xf32>) -> tensor<0xf32> {
  %r = step.reshape %x : tensor<4294967296x4294967296xf32> -> tensor<0xf32>
  return %r : tensor<0xf32>
}
