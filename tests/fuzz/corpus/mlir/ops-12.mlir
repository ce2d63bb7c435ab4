func.func @cross_entropy_grad(%l: tensor<32x10xf32>, %y: tensor<32xi64>, %s: tensor<f32>, %gn: tensor<32xf32>,
                              %lb: tensor<?x5xbf16>, %yb: tensor<?xi32>, %sb: tensor<bf16>)
    -> (tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x10xf32>, tensor<?x5xbf16>, tensor<32x10xf32>, tensor<32x10xf32>) {
  %0 = step.cross_entropy_grad %l, %y, %s reduction = mean : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>
  %1 = step.cross_entropy_grad %l, %y, %s reduction = sum ignore_index = 0 : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>
  %2 = step.cross_entropy_grad %l, %y, %gn reduction = none ignore_index = -1 : tensor<32x10xf32>, tensor<32xi64>, tensor<32xf32> -> tensor<32x10xf32>
  %3 = step.cross_entropy_grad %lb, %yb, %sb reduction = mean : tensor<?x5xbf16>, tensor<?xi32>, tensor<bf16> -> tensor<?x5xbf16>
  %4 = "step.cross_entropy_grad"(%l, %y, %gn) <{reduction = 0 : i32}> : (tensor<32x10xf32>, tensor<32xi64>, tensor<32xf32>) -> tensor<32x10xf32>
  %5 = "step.cross_entropy_grad"(%l, %y, %s) <{reduction = 2 : i32, ignore_index = 3 : i64}> : (tensor<32x10xf32>, tensor<32xi64>, tensor<f32>) -> tensor<32x10xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x10xf32>, tensor<?x5xbf16>, tensor<32x10xf32>, tensor<32x10xf32>
}


func.func @check_finite(%a: tensor<4xf32>, %b: tensor<2x3xbf16>, %c: tensor<f16>, %d: tensor<0x?xf32>)
    -> (tensor<i1>, tensor<i1>, tensor<i1>) {
  %0 = step.check_finite %a : tensor<4xf32>
  %1 = step.check_finite %a, %b, %c, %d : tensor<4xf32>, tensor<2x3xbf16>, tensor<f16>, tensor<0x?xf32>
  %2 = step.check_finite %b, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  return %0, %1, %2 : tensor<i1>, tensor<i1>, tensor<i1>
}


func.func @sgd_update(%p: tensor<8xf32>, %g: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>, %b: tensor<8xf32>, %ph: tensor<2x3xbf16>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %0 = step.sgd_update %p, %g, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  %1:2 = step.sgd_update %p, %g, %t, %lr momentum_buffer %b {momentum = 0.9 : f64, dampening = 0.1 : f64, weight_decay = 5.0e-4 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  %2 = step.sgd_update %ph, %ph, %t, %lr {weight_decay = 0.01 : f64, momentum = 0.0 : f64} : (tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<i64>, tensor<f32>) -> tensor<2x3xbf16>
  %3:2 = "step.sgd_update"(%p, %g, %t, %lr, %b) <{momentum = 0.5 : f64, nesterov}> : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %0, %1#0, %1#1, %2, %3#0, %3#1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3xbf16>, tensor<8xf32>, tensor<8xf32>
}


