func.func @pow(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>) {
  %0 = step.pow %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.pow %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.pow %a2, %b2 : tensor<bf16>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>
}


func.func @gelu(%f32: tensor<8x?xf32>, %f16: tensor<0xf16>, %bf16: tensor<bf16>)
    -> (tensor<8x?xf32>, tensor<8x?xf32>, tensor<0xf16>, tensor<bf16>) {
  %0 = step.gelu %f32 approximate none : tensor<8x?xf32>
  %1 = step.gelu %f32 approximate tanh : tensor<8x?xf32>
  %2 = step.gelu %f16 approximate tanh : tensor<0xf16>
  %3 = step.gelu %bf16 approximate none : tensor<bf16>
  return %0, %1, %2, %3 : tensor<8x?xf32>, tensor<8x?xf32>, tensor<0xf16>, tensor<bf16>
}


func.func @compare_directions(%a: tensor<4xf32>, %b: tensor<4xf32>)
    -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %0 = step.compare eq, %a, %b : tensor<4xf32>
  %1 = step.compare ne, %a, %b : tensor<4xf32>
  %2 = step.compare lt, %a, %b : tensor<4xf32>
  %3 = step.compare le, %a, %b : tensor<4xf32>
  %4 = step.compare gt, %b, %a : tensor<4xf32>
  %5 = step.compare ge, %b, %a : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

func.func @compare_element_types(%f16: tensor<?x3xf16>, %f16s: tensor<2x3xf16>, %bf16: tensor<bf16>,
                                 %i32: tensor<0xi32>, %i64: tensor<2x?xi64>, %i1: tensor<5xi1>)
    -> (tensor<2x3xi1>, tensor<i1>, tensor<0xi1>, tensor<2x?xi1>, tensor<5xi1>) {
  %0 = step.compare lt, %f16, %f16s : tensor<?x3xf16>, tensor<2x3xf16>
  %1 = step.compare ge, %bf16, %bf16 : tensor<bf16>
  %2 = step.compare eq, %i32, %i32 : tensor<0xi32>
  %3 = step.compare gt, %i64, %i64 : tensor<2x?xi64>
  %4 = step.compare ne, %i1, %i1 : tensor<5xi1>
  return %0, %1, %2, %3, %4 : tensor<2x3xi1>, tensor<i1>, tensor<0xi1>, tensor<2x?xi1>, tensor<5xi1>
}


func.func @select(%p: tensor<4xi1>, %f32: tensor<4xf32>, %f16: tensor<4xf16>, %bf16: tensor<4xbf16>,
                  %i32: tensor<4xi32>, %i64: tensor<4xi64>, %i1: tensor<4xi1>)
    -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xi32>, tensor<4xi64>, tensor<4xi1>) {
  %0 = step.select %p, %f32, %f32 : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>
  %1 = step.select %p, %f16, %f16 : tensor<4xi1>, tensor<4xf16>
  %2 = step.select %p, %bf16, %bf16 : tensor<4xi1>, tensor<4xbf16>
  %3 = step.select %p, %i32, %i32 : tensor<4xi1>, tensor<4xi32>
  %4 = step.select %p, %i64, %i64 : tensor<4xi1>, tensor<4xi64>
  %5 = step.select %p, %i1, %p : tensor<4xi1>, tensor<4xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xi32>, tensor<4xi64>, tensor<4xi1>
}

