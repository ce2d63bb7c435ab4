func.func @row_operands_are_inputs(%x: tensor<8x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %gw = step.neg %w : tensor<32xf32>
  %ln = step.layer_norm %x, %gw, %b eps = 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  %bg = step.broadcast_in_dim %gw, dims = [1] : tensor<32xf32> -> tensor<8x32xf32>
  %o = step.add %ln, %bg : tensor<8x32xf32>
  return %o : tensor<8x32xf32>
}
