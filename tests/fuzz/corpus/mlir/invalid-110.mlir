func.func @pad_c1(%x: tensor<2x3xf32>) -> tensor<3x3xf32> {
  %0 = step.pad %x low = [1] high = [0, 0] value = 0.0 : tensor<2x3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}
