func.func @slice_full_strided(%x: tensor<1x3xi64>) -> tensor<1x3xi64> {
  %0 = step.slice %x start = [0, 0] limit = [1, 3] strides = [5, 1] : tensor<1x3xi64> -> tensor<1x3xi64>
  return %0 : tensor<1x3xi64>
}
