func.func @attention(%q: tensor<2x16x8xbf16>, %k: tensor<2x12x8xbf16>, %v: tensor<2x12x4xbf16>) {
  %0 = "step.attention"(%q, %k, %v) : (tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>) -> tensor<2x16x4xbf16>
  %1 = "step.attention"(%q, %k, %v) <{causal, scale = 0.125 : f64}> : (tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>) -> tensor<2x16x4xbf16>
  return
}

func.func @check_finite(%a: tensor<4xf32>, %b: tensor<2x3xbf16>) {
  %0 = "step.check_finite"(%a, %b) : (tensor<4xf32>, tensor<2x3xbf16>) -> tensor<i1>
  %1 = "step.check_finite"(%b) : (tensor<2x3xbf16>) -> tensor<i1>
  return
}

func.func @attribute_dictionary(%a: tensor<4xf32>) {
  %0 = "step.compare"(%a, %a) {direction = 5 : i32} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %1 = "step.reduce_sum"(%a) {dims = array<i64: 0>, keepdim} : (tensor<4xf32>) -> tensor<1xf32>
  return
}
