func.func @softmax(%f32: tensor<4x10xf32>, %f16: tensor<?x0xf16>, %bf16: tensor<2x3x4xbf16>)
    -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>) {
  %0 = step.softmax %f32 dim = 1 : tensor<4x10xf32>
  %1 = step.softmax %f32 dim = 0 : tensor<4x10xf32>
  %2 = step.softmax %f16 dim = 0 : tensor<?x0xf16>
  %3 = step.softmax %bf16 dim = 2 : tensor<2x3x4xbf16>
  return %0, %1, %2, %3 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>
}

func.func @log_softmax(%f32: tensor<4x10xf32>, %f16: tensor<?x0xf16>, %bf16: tensor<2x3x4xbf16>)
    -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>) {
  %0 = step.log_softmax %f32 dim = 1 : tensor<4x10xf32>
  %1 = step.log_softmax %f32 dim = 0 : tensor<4x10xf32>
  %2 = step.log_softmax %f16 dim = 1 : tensor<?x0xf16>
  %3 = step.log_softmax %bf16 dim = 2 : tensor<2x3x4xbf16>
  return %0, %1, %2, %3 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>
}


func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>,
                      %xh: tensor<?x2x8xf16>, %wh: tensor<2x8xf16>, %xb: tensor<8xbf16>, %wb: tensor<8xbf16>)
    -> (tensor<4x8xf32>, tensor<?x2x8xf16>, tensor<8xbf16>) {
  %0 = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %1 = step.layer_norm %xh, %wh, %wh eps = 1.0e-03 : tensor<?x2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>
  %2 = step.layer_norm %xb, %wb, %wb eps = 1.0e-02 : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<?x2x8xf16>, tensor<8xbf16>
}


func.func @embedding(%tok: tensor<4x16xi32>, %wte: tensor<50257x768xf32>, %i64: tensor<?xi64>, %wh: tensor<10x4xf16>,
                     %s: tensor<i32>, %wb: tensor<?x3xbf16>, %z: tensor<0xi64>)
    -> (tensor<4x16x768xf32>, tensor<?x4xf16>, tensor<3xbf16>, tensor<0x4xf16>) {
  %0 = step.embedding %tok, %wte : tensor<4x16xi32>, tensor<50257x768xf32> -> tensor<4x16x768xf32>
  %1 = step.embedding %i64, %wh : tensor<?xi64>, tensor<10x4xf16> -> tensor<?x4xf16>
  %2 = step.embedding %s, %wb : tensor<i32>, tensor<?x3xbf16> -> tensor<3xbf16>
  %3 = step.embedding %z, %wh : tensor<0xi64>, tensor<10x4xf16> -> tensor<0x4xf16>
  return %0, %1, %2, %3 : tensor<4x16x768xf32>, tensor<?x4xf16>, tensor<3xbf16>, tensor<0x4xf16>
}


