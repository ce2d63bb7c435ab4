func.func @layer_norm_c1_weight_rank(%x: tensor<8xf32>, %w: tensor<1x8xf32>) -> tensor<8xf32> {
  %0 = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32>
  return %0 : tensor<8xf32>
}
