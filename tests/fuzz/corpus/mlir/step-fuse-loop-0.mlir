func.func @chain(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xbf16> {
  %a = step.attention %q, %k, %v : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %bb = step.broadcast_in_dim %b, dims = [2] : tensor<8xf32> -> tensor<2x4x8xf32>
  %s = step.add %a, %bb : tensor<2x4x8xf32>
  %g = step.gelu %s approximate none : tensor<2x4x8xf32>
  %c = step.cast %g : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  return %c : tensor<2x4x8xbf16>
}
