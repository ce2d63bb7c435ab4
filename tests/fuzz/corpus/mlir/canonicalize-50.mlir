func.func @slice_of_dynamic(%x: tensor<?xf32>) -> tensor<4xf32> {
  %0 = step.slice %x start = [0] limit = [4] strides = [1] : tensor<?xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
