func.func @reduce_max(%f32: tensor<4x?xf32>, %f16: tensor<3xf16>, %bf16: tensor<2x2xbf16>, %i32: tensor<0x5xi32>, %i64: tensor<i64>)
    -> (tensor<4x1xf32>, tensor<f16>, tensor<1x1xbf16>, tensor<0xi32>, tensor<i64>) {
  %0 = step.reduce_max %f32 dims = [1] keepdim : tensor<4x?xf32> -> tensor<4x1xf32>
  %1 = step.reduce_max %f16 dims = [0] : tensor<3xf16> -> tensor<f16>
  %2 = step.reduce_max %bf16 dims = [0, 1] keepdim : tensor<2x2xbf16> -> tensor<1x1xbf16>
  %3 = step.reduce_max %i32 dims = [1] : tensor<0x5xi32> -> tensor<0xi32>
  %4 = step.reduce_max %i64 dims = [] keepdim : tensor<i64> -> tensor<i64>
  return %0, %1, %2, %3, %4 : tensor<4x1xf32>, tensor<f16>, tensor<1x1xbf16>, tensor<0xi32>, tensor<i64>
}

func.func @reduce_mean(%f32: tensor<4x8xf32>, %f16: tensor<?x8xf16>, %bf16: tensor<2x0xbf16>)
    -> (tensor<f32>, tensor<?x1xf16>, tensor<2xbf16>) {
  %0 = step.reduce_mean %f32 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %1 = step.reduce_mean %f16 dims = [1] keepdim : tensor<?x8xf16> -> tensor<?x1xf16>
  %2 = step.reduce_mean %bf16 dims = [1] : tensor<2x0xbf16> -> tensor<2xbf16>
  return %0, %1, %2 : tensor<f32>, tensor<?x1xf16>, tensor<2xbf16>
}


func.func @matmul_transposes(%x: tensor<32x784xf32>, %w: tensor<784x256xf32>, %wt: tensor<256x784xf32>, %xt: tensor<784x32xf32>)
    -> (tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>) {
  %0 = step.matmul %x, %w : tensor<32x784xf32>, tensor<784x256xf32> -> tensor<32x256xf32>
  %1 = step.matmul %x, %wt transpose_b : tensor<32x784xf32>, tensor<256x784xf32> -> tensor<32x256xf32>
  %2 = step.matmul %xt, %w transpose_a : tensor<784x32xf32>, tensor<784x256xf32> -> tensor<32x256xf32>
  %3 = step.matmul %xt, %wt transpose_a transpose_b : tensor<784x32xf32>, tensor<256x784xf32> -> tensor<32x256xf32>
  return %0, %1, %2, %3 : tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>
}

func.func @matmul_batched(%a: tensor<2x4x3x8xf16>, %b: tensor<2x4x8x5xf16>, %w: tensor<5x8xf16>,
                          %q: tensor<?x3x8xbf16>, %k: tensor<?x?x8xbf16>)
    -> (tensor<2x4x3x5xf16>, tensor<2x4x3x5xf16>, tensor<?x3x?xbf16>) {
  %0 = step.matmul %a, %b : tensor<2x4x3x8xf16>, tensor<2x4x8x5xf16> -> tensor<2x4x3x5xf16>
  %1 = step.matmul %a, %w transpose_b : tensor<2x4x3x8xf16>, tensor<5x8xf16> -> tensor<2x4x3x5xf16>
  %2 = step.matmul %q, %k transpose_b : tensor<?x3x8xbf16>, tensor<?x?x8xbf16> -> tensor<?x3x?xbf16>
  return %0, %1, %2 : tensor<2x4x3x5xf16>, tensor<2x4x3x5xf16>, tensor<?x3x?xbf16>
}

func.func @matmul_zero_size(%a: tensor<0x4xf32>, %b: tensor<4x3xf32>, %c: tensor<2x0xf32>, %d: tensor<0x5xf32>)
    -> (tensor<0x3xf32>, tensor<2x5xf32>) {
  %0 = step.matmul %a, %b : tensor<0x4xf32>, tensor<4x3xf32> -> tensor<0x3xf32>
  %1 = step.matmul %c, %d : tensor<2x0xf32>, tensor<0x5xf32> -> tensor<2x5xf32>
  return %0, %1 : tensor<0x3xf32>, tensor<2x5xf32>
}


