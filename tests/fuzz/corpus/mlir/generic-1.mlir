func.func @constant() {
  %0 = "step.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %1 = "step.constant"() <{value = dense<true> : tensor<2x2xi1>}> : () -> tensor<2x2xi1>
  %2 = "step.constant"() <{value = dense<-3> : tensor<i32>}> : () -> tensor<i32>
  return
}

func.func @shape_ops(%x: tensor<2x3xf32>, %v: tensor<3xi32>) {
  %0 = "step.broadcast_in_dim"(%v) <{broadcast_dimensions = array<i64: 1>}> : (tensor<3xi32>) -> tensor<4x3xi32>
  %1 = "step.reshape"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = "step.transpose"(%x) <{permutation = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %3 = "step.slice"(%x) <{start = array<i64: 1, 0>, limit = array<i64: 2, 3>, strides = array<i64: 1, 2>}> : (tensor<2x3xf32>) -> tensor<1x2xf32>
  %4 = "step.concat"(%x, %x) <{dimension = 1 : i64}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  %5 = "step.pad"(%v) <{low = array<i64: 2>, high = array<i64: 1>, value = -1.0 : f64}> : (tensor<3xi32>) -> tensor<6xi32>
  %6 = "step.iota"() <{dimension = 1 : i64}> : () -> tensor<2x5xi64>
  return
}

func.func @reductions(%x: tensor<4x8xf16>) {
  %0 = "step.reduce_sum"(%x) <{dims = array<i64: 1>}> : (tensor<4x8xf16>) -> tensor<4xf16>
  %1 = "step.reduce_max"(%x) <{dims = array<i64: 0>, keepdim}> : (tensor<4x8xf16>) -> tensor<1x8xf16>
  %2 = "step.reduce_mean"(%x) <{dims = array<i64: 0, 1>}> : (tensor<4x8xf16>) -> tensor<f16>
  return
}

func.func @matmul(%a: tensor<3x8xf32>, %b: tensor<8x3xf32>) {
  %0 = "step.matmul"(%a, %b) : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
  %1 = "step.matmul"(%a, %a) <{transpose_b}> : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  %2 = "step.matmul"(%a, %a) <{transpose_a}> : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<8x8xf32>
  %3 = "step.matmul"(%b, %a) <{transpose_a, transpose_b}> : (tensor<8x3xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  return
}

func.func @nn(%x: tensor<4x10xf32>, %w: tensor<10xf32>, %t: tensor<4xi64>) {
  %0 = "step.softmax"(%x) <{dimension = 1 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %1 = "step.log_softmax"(%x) <{dimension = 0 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %2 = "step.layer_norm"(%x, %w, %w) <{epsilon = 1.0e-05 : f64}> : (tensor<4x10xf32>, tensor<10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %3 = "step.embedding"(%t, %x) : (tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %4 = "step.dropout"(%x) <{p = 0.25 : f64, seed = 7 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf32>
  return
}

func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi32>) {
  %0 = "step.cross_entropy"(%l, %t) <{reduction = 0 : i32}> : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4xf32>
  %1 = "step.cross_entropy"(%l, %t) <{reduction = 1 : i32}> : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  %2 = "step.cross_entropy"(%l, %t) <{reduction = 2 : i32, ignore_index = 3 : i64}> : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return
}

