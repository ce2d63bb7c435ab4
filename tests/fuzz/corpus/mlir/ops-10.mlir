func.func @cross_entropy(%l: tensor<32x10xf32>, %y: tensor<32xi64>, %lh: tensor<?x5xf16>, %yh: tensor<?xi32>,
                         %lb: tensor<8x3xbf16>, %yb: tensor<8xi32>)
    -> (tensor<f32>, tensor<f32>, tensor<32xf32>, tensor<f32>, tensor<?xf16>, tensor<bf16>) {
  %0 = step.cross_entropy %l, %y reduction = mean : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
  %1 = step.cross_entropy %l, %y reduction = sum : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
  %2 = step.cross_entropy %l, %y reduction = none : tensor<32x10xf32>, tensor<32xi64> -> tensor<32xf32>
  %3 = step.cross_entropy %l, %y reduction = mean ignore_index = 0 : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
  %4 = step.cross_entropy %lh, %yh reduction = none ignore_index = -1 : tensor<?x5xf16>, tensor<?xi32> -> tensor<?xf16>
  %5 = step.cross_entropy %lb, %yb reduction = sum ignore_index = -100 : tensor<8x3xbf16>, tensor<8xi32> -> tensor<bf16>
  return %0, %1, %2, %3, %4, %5 : tensor<f32>, tensor<f32>, tensor<32xf32>, tensor<f32>, tensor<?xf16>, tensor<bf16>
}


func.func @dropout(%f32: tensor<4x8xf32>, %f16: tensor<?xf16>, %bf16: tensor<bf16>, %z: tensor<0x2xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<?xf16>, tensor<bf16>, tensor<0x2xf32>) {
  %0 = step.dropout %f32 p = 1.0e-01 seed = 42 : tensor<4x8xf32>
  %1 = step.dropout %f32 p = 0.0 seed = 0 : tensor<4x8xf32>
  %2 = step.dropout %f16 p = 0.5 seed = -7 : tensor<?xf16>
  %3 = step.dropout %bf16 p = 0.9 seed = 9223372036854775807 : tensor<bf16>
  %4 = step.dropout %z p = 0.25 seed = 1 : tensor<0x2xf32>
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<?xf16>, tensor<bf16>, tensor<0x2xf32>
}


func.func @attention(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %0 = step.attention %q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %1 = step.attention %q, %k, %v causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %2 = step.attention %q, %k, %v scale = 0.125 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %3 = step.attention %q, %k, %v causal scale = 0.5 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  return %0, %1, %2, %3 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

