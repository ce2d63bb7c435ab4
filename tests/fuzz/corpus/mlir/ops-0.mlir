func.func @neg(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>, %i32: tensor<2x3xi32>, %i64: tensor<?xi64>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>) {
  %0 = step.neg %f32 : tensor<4x?xf32>
  %1 = step.neg %f16 : tensor<0x3xf16>
  %2 = step.neg %bf16 : tensor<bf16>
  %3 = step.neg %i32 : tensor<2x3xi32>
  %4 = step.neg %i64 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
}

func.func @abs(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>, %i32: tensor<2x3xi32>, %i64: tensor<?xi64>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>) {
  %0 = step.abs %f32 : tensor<4x?xf32>
  %1 = step.abs %f16 : tensor<0x3xf16>
  %2 = step.abs %bf16 : tensor<bf16>
  %3 = step.abs %i32 : tensor<2x3xi32>
  %4 = step.abs %i64 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
}

func.func @relu(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>, %i32: tensor<2x3xi32>, %i64: tensor<?xi64>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>) {
  %0 = step.relu %f32 : tensor<4x?xf32>
  %1 = step.relu %f16 : tensor<0x3xf16>
  %2 = step.relu %bf16 : tensor<bf16>
  %3 = step.relu %i32 : tensor<2x3xi32>
  %4 = step.relu %i64 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
}


func.func @exp(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.exp %f32 : tensor<4x?xf32>
  %1 = step.exp %f16 : tensor<0x3xf16>
  %2 = step.exp %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @log(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.log %f32 : tensor<4x?xf32>
  %1 = step.log %f16 : tensor<0x3xf16>
  %2 = step.log %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @tanh(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.tanh %f32 : tensor<4x?xf32>
  %1 = step.tanh %f16 : tensor<0x3xf16>
  %2 = step.tanh %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @sigmoid(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.sigmoid %f32 : tensor<4x?xf32>
  %1 = step.sigmoid %f16 : tensor<0x3xf16>
  %2 = step.sigmoid %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

