func.func @constant() -> (tensor<2xf32>, tensor<2x2xf16>, tensor<3xbf16>, tensor<2xi32>, tensor<i64>,
                          tensor<2xi1>, tensor<0x3xf32>, tensor<f32>) {
  %0 = step.constant dense<[1.0, -2.5]> : tensor<2xf32>
  %1 = step.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf16>
  %2 = step.constant dense<1.5> : tensor<3xbf16>
  %3 = step.constant dense<[7, -8]> : tensor<2xi32>
  %4 = step.constant dense<9223372036854775807> : tensor<i64>
  %5 = step.constant dense<[true, false]> : tensor<2xi1>
  %6 = step.constant dense<> : tensor<0x3xf32>
  %7 = step.constant dense<0.0> : tensor<f32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2xf32>, tensor<2x2xf16>, tensor<3xbf16>, tensor<2xi32>, tensor<i64>,
                                          tensor<2xi1>, tensor<0x3xf32>, tensor<f32>
}


func.func @broadcast_in_dim(%b: tensor<256xf32>, %ones: tensor<1x3xf16>, %s: tensor<bf16>, %i: tensor<4xi32>,
                            %l: tensor<?xi64>, %m: tensor<2x1xi1>, %z: tensor<0xf32>)
    -> (tensor<32x256xf32>, tensor<5x3xf16>, tensor<2x3xbf16>, tensor<4x2xi32>, tensor<?x7xi64>, tensor<2x6xi1>, tensor<3x0xf32>) {
  %0 = step.broadcast_in_dim %b, dims = [1] : tensor<256xf32> -> tensor<32x256xf32>
  %1 = step.broadcast_in_dim %ones, dims = [0, 1] : tensor<1x3xf16> -> tensor<5x3xf16>
  %2 = step.broadcast_in_dim %s, dims = [] : tensor<bf16> -> tensor<2x3xbf16>
  %3 = step.broadcast_in_dim %i, dims = [0] : tensor<4xi32> -> tensor<4x2xi32>
  %4 = step.broadcast_in_dim %l, dims = [0] : tensor<?xi64> -> tensor<?x7xi64>
  %5 = step.broadcast_in_dim %m, dims = [0, 1] : tensor<2x1xi1> -> tensor<2x6xi1>
  %6 = step.broadcast_in_dim %z, dims = [1] : tensor<0xf32> -> tensor<3x0xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<32x256xf32>, tensor<5x3xf16>, tensor<2x3xbf16>, tensor<4x2xi32>, tensor<?x7xi64>, tensor<2x6xi1>, tensor<3x0xf32>
}


func.func @reshape(%f32: tensor<4x8xf32>, %f16: tensor<?x8xf16>, %bf16: tensor<bf16>, %i32: tensor<0x4xi32>,
                   %i64: tensor<6xi64>, %i1: tensor<2x2xi1>)
    -> (tensor<32xf32>, tensor<?x2x4xf16>, tensor<1x1xbf16>, tensor<2x0xi32>, tensor<2x3xi64>, tensor<4xi1>) {
  %0 = step.reshape %f32 : tensor<4x8xf32> -> tensor<32xf32>
  %1 = step.reshape %f16 : tensor<?x8xf16> -> tensor<?x2x4xf16>
  %2 = step.reshape %bf16 : tensor<bf16> -> tensor<1x1xbf16>
  %3 = step.reshape %i32 : tensor<0x4xi32> -> tensor<2x0xi32>
  %4 = step.reshape %i64 : tensor<6xi64> -> tensor<2x3xi64>
  %5 = step.reshape %i1 : tensor<2x2xi1> -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<32xf32>, tensor<?x2x4xf16>, tensor<1x1xbf16>, tensor<2x0xi32>, tensor<2x3xi64>, tensor<4xi1>
}

func.func @reshape_dynamic_to_static(%x: tensor<?x4xf32>) -> tensor<2x2x2xf32> {
  %0 = step.reshape %x : tensor<?x4xf32> -> tensor<2x2x2xf32>
  return %0 : tensor<2x2x2xf32>
}


