func.func @pad_nonzero(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %0 = step.pad %x low = [0, 1] high = [0, 0] value = 0.0 : tensor<2x3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
