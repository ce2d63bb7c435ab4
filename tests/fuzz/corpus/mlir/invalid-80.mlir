func.func @constant_i8() -> tensor<2xi8> {
  %0 = step.constant dense<1> : tensor<2xi8>
  return %0 : tensor<2xi8>
}
