func.func @cross_entropy_c2(%l: tensor<4x10xf32>, %t: tensor<5xi64>) -> tensor<f32> {
  %0 = step.cross_entropy %l, %t reduction = mean : tensor<4x10xf32>, tensor<5xi64> -> tensor<f32>
  return %0 : tensor<f32>
}
