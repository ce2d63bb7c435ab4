func.func @select_dynamic(%p: tensor<?x3xi1>, %a: tensor<2x?xf32>, %b: tensor<?x?xf32>,
                          %ps: tensor<i1>, %s: tensor<f32>, %pz: tensor<0xi1>, %z: tensor<0xf32>)
    -> (tensor<2x3xf32>, tensor<f32>, tensor<0xf32>) {
  %0 = step.select %p, %a, %b : tensor<?x3xi1>, tensor<2x?xf32>, tensor<?x?xf32>
  %1 = step.select %ps, %s, %s : tensor<i1>, tensor<f32>
  %2 = step.select %pz, %z, %z : tensor<0xi1>, tensor<0xf32>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<f32>, tensor<0xf32>
}


func.func @cast_floats(%f32: tensor<4x?xf32>, %f16: tensor<0xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf16>, tensor<4x?xbf16>, tensor<0xf32>, tensor<0xbf16>, tensor<f32>, tensor<f16>) {
  %0 = step.cast %f32 : tensor<4x?xf32> -> tensor<4x?xf16>
  %1 = step.cast %f32 : tensor<4x?xf32> -> tensor<4x?xbf16>
  %2 = step.cast %f16 : tensor<0xf16> -> tensor<0xf32>
  %3 = step.cast %f16 : tensor<0xf16> -> tensor<0xbf16>
  %4 = step.cast %bf16 : tensor<bf16> -> tensor<f32>
  %5 = step.cast %bf16 : tensor<bf16> -> tensor<f16>
  return %0, %1, %2, %3, %4, %5 : tensor<4x?xf16>, tensor<4x?xbf16>, tensor<0xf32>, tensor<0xbf16>, tensor<f32>, tensor<f16>
}

func.func @cast_integers_and_bools(%f32: tensor<2x3xf32>, %i32: tensor<2x3xi32>, %i64: tensor<2x3xi64>, %i1: tensor<2x3xi1>)
    -> (tensor<2x3xi32>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xi32>, tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) {
  %0 = step.cast %f32 : tensor<2x3xf32> -> tensor<2x3xi32>
  %1 = step.cast %i32 : tensor<2x3xi32> -> tensor<2x3xf32>
  %2 = step.cast %i32 : tensor<2x3xi32> -> tensor<2x3xi64>
  %3 = step.cast %i64 : tensor<2x3xi64> -> tensor<2x3xi32>
  %4 = step.cast %f32 : tensor<2x3xf32> -> tensor<2x3xi1>
  %5 = step.cast %i1 : tensor<2x3xi1> -> tensor<2x3xf32>
  %6 = step.cast %i1 : tensor<2x3xi1> -> tensor<2x3xi64>
  %7 = step.cast %i64 : tensor<2x3xi64> -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2x3xi32>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xi32>, tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
}

func.func @cast_same_type(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = step.cast %x : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}


