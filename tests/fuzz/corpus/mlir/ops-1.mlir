func.func @sqrt(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.sqrt %f32 : tensor<4x?xf32>
  %1 = step.sqrt %f16 : tensor<0x3xf16>
  %2 = step.sqrt %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @rsqrt(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.rsqrt %f32 : tensor<4x?xf32>
  %1 = step.rsqrt %f16 : tensor<0x3xf16>
  %2 = step.rsqrt %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @erf(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.erf %f32 : tensor<4x?xf32>
  %1 = step.erf %f16 : tensor<0x3xf16>
  %2 = step.erf %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @sin(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.sin %f32 : tensor<4x?xf32>
  %1 = step.sin %f16 : tensor<0x3xf16>
  %2 = step.sin %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

func.func @cos(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  %0 = step.cos %f32 : tensor<4x?xf32>
  %1 = step.cos %f16 : tensor<0x3xf16>
  %2 = step.cos %bf16 : tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}


func.func @add(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  %0 = step.add %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.add %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.add %a2, %b2 : tensor<bf16>
  %3 = step.add %a3, %b3 : tensor<0x4xi32>
  %4 = step.add %a4, %b4 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

func.func @sub(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  %0 = step.sub %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.sub %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.sub %a2, %b2 : tensor<bf16>
  %3 = step.sub %a3, %b3 : tensor<0x4xi32>
  %4 = step.sub %a4, %b4 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

