func.func @neg_neg_neg(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = step.neg %x : tensor<4xi32>
  %1 = step.neg %0 : tensor<4xi32>
  %2 = step.neg %1 : tensor<4xi32>
  return %2 : tensor<4xi32>
}
