func.func @transpose(%f32: tensor<2x3xf32>, %f16: tensor<2x3x4xf16>, %bf16: tensor<bf16>, %i32: tensor<?x5xi32>,
                     %i64: tensor<0x2xi64>, %i1: tensor<7xi1>)
    -> (tensor<3x2xf32>, tensor<4x2x3xf16>, tensor<bf16>, tensor<5x?xi32>, tensor<2x0xi64>, tensor<7xi1>) {
  %0 = step.transpose %f32, perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = step.transpose %f16, perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>
  %2 = step.transpose %bf16, perm = [] : tensor<bf16> -> tensor<bf16>
  %3 = step.transpose %i32, perm = [1, 0] : tensor<?x5xi32> -> tensor<5x?xi32>
  %4 = step.transpose %i64, perm = [1, 0] : tensor<0x2xi64> -> tensor<2x0xi64>
  %5 = step.transpose %i1, perm = [0] : tensor<7xi1> -> tensor<7xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<3x2xf32>, tensor<4x2x3xf16>, tensor<bf16>, tensor<5x?xi32>, tensor<2x0xi64>, tensor<7xi1>
}


func.func @slice(%f32: tensor<4x8xf32>, %f16: tensor<?x6xf16>, %bf16: tensor<bf16>, %i32: tensor<10xi32>,
                 %i64: tensor<3xi64>, %i1: tensor<5x5xi1>)
    -> (tensor<4x3xf32>, tensor<2x6xf16>, tensor<bf16>, tensor<4xi32>, tensor<0xi64>, tensor<1x5xi1>) {
  %0 = step.slice %f32 start = [0, 2] limit = [4, 8] strides = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
  %1 = step.slice %f16 start = [1, 0] limit = [3, 6] strides = [1, 1] : tensor<?x6xf16> -> tensor<2x6xf16>
  %2 = step.slice %bf16 start = [] limit = [] strides = [] : tensor<bf16> -> tensor<bf16>
  %3 = step.slice %i32 start = [0] limit = [10] strides = [3] : tensor<10xi32> -> tensor<4xi32>
  %4 = step.slice %i64 start = [2] limit = [2] strides = [1] : tensor<3xi64> -> tensor<0xi64>
  %5 = step.slice %i1 start = [4, 0] limit = [5, 5] strides = [1, 1] : tensor<5x5xi1> -> tensor<1x5xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<4x3xf32>, tensor<2x6xf16>, tensor<bf16>, tensor<4xi32>, tensor<0xi64>, tensor<1x5xi1>
}


func.func @concat(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %h: tensor<2x?xf16>, %hs: tensor<?x5xf16>,
                  %bf: tensor<0x2xbf16>, %i: tensor<3xi32>, %l: tensor<1xi64>, %m: tensor<0xi1>)
    -> (tensor<6x3xf32>, tensor<?x5xf16>, tensor<0x4xbf16>, tensor<9xi32>, tensor<1xi64>, tensor<0xi1>) {
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  %1 = step.concat %h, %hs dim = 0 : tensor<2x?xf16>, tensor<?x5xf16> -> tensor<?x5xf16>
  %2 = step.concat %bf, %bf dim = 1 : tensor<0x2xbf16>, tensor<0x2xbf16> -> tensor<0x4xbf16>
  %3 = step.concat %i, %i, %i dim = 0 : tensor<3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<9xi32>
  %4 = step.concat %l dim = 0 : tensor<1xi64> -> tensor<1xi64>
  %5 = step.concat %m, %m dim = 0 : tensor<0xi1>, tensor<0xi1> -> tensor<0xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<6x3xf32>, tensor<?x5xf16>, tensor<0x4xbf16>, tensor<9xi32>, tensor<1xi64>, tensor<0xi1>
}


