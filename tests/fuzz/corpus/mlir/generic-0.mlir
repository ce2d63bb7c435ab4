func.func @unary(%x: tensor<4x?xf32>, %i: tensor<3xi32>, %h: tensor<bf16>) {
  %0 = "step.neg"(%i) : (tensor<3xi32>) -> tensor<3xi32>
  %1 = "step.abs"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %2 = "step.relu"(%i) : (tensor<3xi32>) -> tensor<3xi32>
  %3 = "step.exp"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %4 = "step.log"(%h) : (tensor<bf16>) -> tensor<bf16>
  %5 = "step.tanh"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %6 = "step.sigmoid"(%h) : (tensor<bf16>) -> tensor<bf16>
  %7 = "step.sqrt"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %8 = "step.rsqrt"(%h) : (tensor<bf16>) -> tensor<bf16>
  %9 = "step.erf"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %10 = "step.sin"(%h) : (tensor<bf16>) -> tensor<bf16>
  %11 = "step.cos"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  return
}

func.func @gelu(%x: tensor<8xf16>) {
  %0 = "step.gelu"(%x) <{approximate = 0 : i32}> : (tensor<8xf16>) -> tensor<8xf16>
  %1 = "step.gelu"(%x) <{approximate = 1 : i32}> : (tensor<8xf16>) -> tensor<8xf16>
  return
}

func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %d: tensor<?x3xi64>, %e: tensor<2x3xi64>) {
  %0 = "step.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "step.sub"(%d, %e) : (tensor<?x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  %2 = "step.mul"(%b, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "step.div"(%e, %d) : (tensor<2x3xi64>, tensor<?x3xi64>) -> tensor<2x3xi64>
  %4 = "step.max"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "step.min"(%d, %d) : (tensor<?x3xi64>, tensor<?x3xi64>) -> tensor<?x3xi64>
  %6 = "step.pow"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

func.func @compare(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %0 = "step.compare"(%a, %b) <{direction = 0 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %1 = "step.compare"(%a, %b) <{direction = 1 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %2 = "step.compare"(%a, %b) <{direction = 2 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %3 = "step.compare"(%a, %b) <{direction = 3 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %4 = "step.compare"(%a, %b) <{direction = 4 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %5 = "step.compare"(%a, %b) <{direction = 5 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return
}

func.func @select_cast(%p: tensor<?x2xi1>, %a: tensor<3x2xbf16>, %b: tensor<3x?xbf16>) {
  %0 = "step.select"(%p, %a, %b) : (tensor<?x2xi1>, tensor<3x2xbf16>, tensor<3x?xbf16>) -> tensor<3x2xbf16>
  %1 = "step.cast"(%a) : (tensor<3x2xbf16>) -> tensor<3x2xf32>
  %2 = "step.cast"(%p) : (tensor<?x2xi1>) -> tensor<?x2xi64>
  return
}

