func.func @mul(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  %0 = step.mul %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.mul %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.mul %a2, %b2 : tensor<bf16>
  %3 = step.mul %a3, %b3 : tensor<0x4xi32>
  %4 = step.mul %a4, %b4 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

func.func @div(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  %0 = step.div %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.div %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.div %a2, %b2 : tensor<bf16>
  %3 = step.div %a3, %b3 : tensor<0x4xi32>
  %4 = step.div %a4, %b4 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

func.func @max(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  %0 = step.max %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.max %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.max %a2, %b2 : tensor<bf16>
  %3 = step.max %a3, %b3 : tensor<0x4xi32>
  %4 = step.max %a4, %b4 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

func.func @min(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  %0 = step.min %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  %1 = step.min %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  %2 = step.min %a2, %b2 : tensor<bf16>
  %3 = step.min %a3, %b3 : tensor<0x4xi32>
  %4 = step.min %a4, %b4 : tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

