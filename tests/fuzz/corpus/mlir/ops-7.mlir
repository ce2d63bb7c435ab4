func.func @pad(%f32: tensor<2x3xf32>, %f16: tensor<?x3xf16>, %bf16: tensor<bf16>, %i32: tensor<0xi32>,
               %i64: tensor<2xi64>, %i1: tensor<2xi1>)
    -> (tensor<4x4xf32>, tensor<?x5xf16>, tensor<bf16>, tensor<3xi32>, tensor<2xi64>, tensor<4xi1>) {
  %0 = step.pad %f32 low = [0, 1] high = [2, 0] value = 0.0 : tensor<2x3xf32> -> tensor<4x4xf32>
  %1 = step.pad %f16 low = [1, 1] high = [1, 1] value = -65504.0 : tensor<?x3xf16> -> tensor<?x5xf16>
  %2 = step.pad %bf16 low = [] high = [] value = 1.0 : tensor<bf16> -> tensor<bf16>
  %3 = step.pad %i32 low = [1] high = [2] value = -1.0 : tensor<0xi32> -> tensor<3xi32>
  %4 = step.pad %i64 low = [0] high = [0] value = 7.0 : tensor<2xi64> -> tensor<2xi64>
  %5 = step.pad %i1 low = [1] high = [1] value = 1.0 : tensor<2xi1> -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<4x4xf32>, tensor<?x5xf16>, tensor<bf16>, tensor<3xi32>, tensor<2xi64>, tensor<4xi1>
}


func.func @iota() -> (tensor<8xi64>, tensor<4x8xi32>, tensor<4xf32>, tensor<2x3xf16>, tensor<0x5xbf16>) {
  %0 = step.iota dim = 0 : tensor<8xi64>
  %1 = step.iota dim = 1 : tensor<4x8xi32>
  %2 = step.iota dim = 0 : tensor<4xf32>
  %3 = step.iota dim = 0 : tensor<2x3xf16>
  %4 = step.iota dim = 1 : tensor<0x5xbf16>
  return %0, %1, %2, %3, %4 : tensor<8xi64>, tensor<4x8xi32>, tensor<4xf32>, tensor<2x3xf16>, tensor<0x5xbf16>
}

func.func @iota_symbolic() -> tensor<4x?xi64> {
  %0 = step.iota dim = 1 {step.dims = ["", "T"]} : tensor<4x?xi64>
  return %0 : tensor<4x?xi64>
}


func.func @reduce_sum(%f32: tensor<4x8xf32>, %f16: tensor<?x8x2xf16>, %bf16: tensor<bf16>, %i32: tensor<0x3xi32>, %i64: tensor<5xi64>)
    -> (tensor<4xf32>, tensor<4x1xf32>, tensor<?xf16>, tensor<1x8x1xf16>, tensor<bf16>, tensor<3xi32>, tensor<i64>) {
  %0 = step.reduce_sum %f32 dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %1 = step.reduce_sum %f32 dims = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %2 = step.reduce_sum %f16 dims = [2, 1] : tensor<?x8x2xf16> -> tensor<?xf16>
  %3 = step.reduce_sum %f16 dims = [0, 2] keepdim : tensor<?x8x2xf16> -> tensor<1x8x1xf16>
  %4 = step.reduce_sum %bf16 dims = [] : tensor<bf16> -> tensor<bf16>
  %5 = step.reduce_sum %i32 dims = [0] : tensor<0x3xi32> -> tensor<3xi32>
  %6 = step.reduce_sum %i64 dims = [0] : tensor<5xi64> -> tensor<i64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4x1xf32>, tensor<?xf16>, tensor<1x8x1xf16>, tensor<bf16>, tensor<3xi32>, tensor<i64>
}

