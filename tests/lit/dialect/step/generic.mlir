// RUN: step-opt %s | FileCheck %s
// RUN: step-opt %s --mlir-print-op-generic | step-opt | FileCheck %s

// Every step op written in the generic form, attributes as properties
// (`<{...}>`, enums as their i32 values), prints back in its custom form; the
// second RUN line checks that the generic form step-opt prints parses back too.

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<4x?xf32>, %[[I:.+]]: tensor<3xi32>, %[[H:.+]]: tensor<bf16>)
func.func @unary(%x: tensor<4x?xf32>, %i: tensor<3xi32>, %h: tensor<bf16>) {
  // CHECK-NEXT: step.neg %[[I]] : tensor<3xi32>{{$}}
  %0 = "step.neg"(%i) : (tensor<3xi32>) -> tensor<3xi32>
  // CHECK-NEXT: step.abs %[[X]] : tensor<4x?xf32>{{$}}
  %1 = "step.abs"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: step.relu %[[I]] : tensor<3xi32>{{$}}
  %2 = "step.relu"(%i) : (tensor<3xi32>) -> tensor<3xi32>
  // CHECK-NEXT: step.exp %[[X]] : tensor<4x?xf32>{{$}}
  %3 = "step.exp"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: step.log %[[H]] : tensor<bf16>{{$}}
  %4 = "step.log"(%h) : (tensor<bf16>) -> tensor<bf16>
  // CHECK-NEXT: step.tanh %[[X]] : tensor<4x?xf32>{{$}}
  %5 = "step.tanh"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: step.sigmoid %[[H]] : tensor<bf16>{{$}}
  %6 = "step.sigmoid"(%h) : (tensor<bf16>) -> tensor<bf16>
  // CHECK-NEXT: step.sqrt %[[X]] : tensor<4x?xf32>{{$}}
  %7 = "step.sqrt"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: step.rsqrt %[[H]] : tensor<bf16>{{$}}
  %8 = "step.rsqrt"(%h) : (tensor<bf16>) -> tensor<bf16>
  // CHECK-NEXT: step.erf %[[X]] : tensor<4x?xf32>{{$}}
  %9 = "step.erf"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: step.sin %[[H]] : tensor<bf16>{{$}}
  %10 = "step.sin"(%h) : (tensor<bf16>) -> tensor<bf16>
  // CHECK-NEXT: step.cos %[[X]] : tensor<4x?xf32>{{$}}
  %11 = "step.cos"(%x) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: return
  return
}

// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.+]]: tensor<8xf16>)
func.func @gelu(%x: tensor<8xf16>) {
  // CHECK-NEXT: step.gelu %[[X]] approximate none : tensor<8xf16>{{$}}
  %0 = "step.gelu"(%x) <{approximate = 0 : i32}> : (tensor<8xf16>) -> tensor<8xf16>
  // CHECK-NEXT: step.gelu %[[X]] approximate tanh : tensor<8xf16>{{$}}
  %1 = "step.gelu"(%x) <{approximate = 1 : i32}> : (tensor<8xf16>) -> tensor<8xf16>
  return
}

// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME: (%[[G:.+]]: tensor<8xbf16>, %[[X:.+]]: tensor<8xbf16>)
func.func @gelu_grad(%g: tensor<8xbf16>, %x: tensor<8xbf16>) {
  // CHECK-NEXT: step.gelu_grad %[[G]], %[[X]] approximate none : tensor<8xbf16>{{$}}
  %0 = "step.gelu_grad"(%g, %x) <{approximate = 0 : i32}> : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  // CHECK-NEXT: step.gelu_grad %[[G]], %[[X]] approximate tanh : tensor<8xbf16>{{$}}
  %1 = "step.gelu_grad"(%g, %x) <{approximate = 1 : i32}> : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  return
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<2x3xf32>, %[[D:.+]]: tensor<?x3xi64>, %[[E:.+]]: tensor<2x3xi64>)
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %d: tensor<?x3xi64>, %e: tensor<2x3xi64>) {
  // CHECK-NEXT: step.add %[[A]], %[[B]] : tensor<2x3xf32>{{$}}
  %0 = "step.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // The generic form states the joined result type.
  // CHECK-NEXT: step.sub %[[D]], %[[E]] : tensor<?x3xi64>, tensor<2x3xi64>{{$}}
  %1 = "step.sub"(%d, %e) : (tensor<?x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  // CHECK-NEXT: step.mul %[[B]], %[[A]] : tensor<2x3xf32>{{$}}
  %2 = "step.mul"(%b, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: step.div %[[E]], %[[D]] : tensor<2x3xi64>, tensor<?x3xi64>{{$}}
  %3 = "step.div"(%e, %d) : (tensor<2x3xi64>, tensor<?x3xi64>) -> tensor<2x3xi64>
  // CHECK-NEXT: step.max %[[A]], %[[B]] : tensor<2x3xf32>{{$}}
  %4 = "step.max"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: step.min %[[D]], %[[D]] : tensor<?x3xi64>{{$}}
  %5 = "step.min"(%d, %d) : (tensor<?x3xi64>, tensor<?x3xi64>) -> tensor<?x3xi64>
  // CHECK-NEXT: step.pow %[[A]], %[[B]] : tensor<2x3xf32>{{$}}
  %6 = "step.pow"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @compare
// CHECK-SAME: (%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>)
func.func @compare(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // CHECK-NEXT: step.compare eq, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %0 = "step.compare"(%a, %b) <{direction = 0 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK-NEXT: step.compare ne, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %1 = "step.compare"(%a, %b) <{direction = 1 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK-NEXT: step.compare lt, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %2 = "step.compare"(%a, %b) <{direction = 2 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK-NEXT: step.compare le, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %3 = "step.compare"(%a, %b) <{direction = 3 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK-NEXT: step.compare gt, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %4 = "step.compare"(%a, %b) <{direction = 4 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK-NEXT: step.compare ge, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %5 = "step.compare"(%a, %b) <{direction = 5 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @select_cast
// CHECK-SAME: (%[[P:.+]]: tensor<?x2xi1>, %[[A:.+]]: tensor<3x2xbf16>, %[[B:.+]]: tensor<3x?xbf16>)
func.func @select_cast(%p: tensor<?x2xi1>, %a: tensor<3x2xbf16>, %b: tensor<3x?xbf16>) {
  // CHECK-NEXT: step.select %[[P]], %[[A]], %[[B]] : tensor<?x2xi1>, tensor<3x2xbf16>, tensor<3x?xbf16>{{$}}
  %0 = "step.select"(%p, %a, %b) : (tensor<?x2xi1>, tensor<3x2xbf16>, tensor<3x?xbf16>) -> tensor<3x2xbf16>
  // CHECK-NEXT: step.cast %[[A]] : tensor<3x2xbf16> -> tensor<3x2xf32>{{$}}
  %1 = "step.cast"(%a) : (tensor<3x2xbf16>) -> tensor<3x2xf32>
  // CHECK-NEXT: step.cast %[[P]] : tensor<?x2xi1> -> tensor<?x2xi64>{{$}}
  %2 = "step.cast"(%p) : (tensor<?x2xi1>) -> tensor<?x2xi64>
  return
}

// CHECK-LABEL: func.func @constant
func.func @constant() {
  // CHECK-NEXT: step.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>{{$}}
  %0 = "step.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  // CHECK-NEXT: step.constant dense<true> : tensor<2x2xi1>{{$}}
  %1 = "step.constant"() <{value = dense<true> : tensor<2x2xi1>}> : () -> tensor<2x2xi1>
  // CHECK-NEXT: step.constant dense<-3> : tensor<i32>{{$}}
  %2 = "step.constant"() <{value = dense<-3> : tensor<i32>}> : () -> tensor<i32>
  return
}

// CHECK-LABEL: func.func @shape_ops
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[V:.+]]: tensor<3xi32>)
func.func @shape_ops(%x: tensor<2x3xf32>, %v: tensor<3xi32>) {
  // CHECK-NEXT: step.broadcast_in_dim %[[V]], dims = [1] : tensor<3xi32> -> tensor<4x3xi32>{{$}}
  %0 = "step.broadcast_in_dim"(%v) <{broadcast_dimensions = array<i64: 1>}> : (tensor<3xi32>) -> tensor<4x3xi32>
  // CHECK-NEXT: step.reshape %[[X]] : tensor<2x3xf32> -> tensor<3x2xf32>{{$}}
  %1 = "step.reshape"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // CHECK-NEXT: step.transpose %[[X]], perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>{{$}}
  %2 = "step.transpose"(%x) <{permutation = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // CHECK-NEXT: step.slice %[[X]] start = [1, 0] limit = [2, 3] strides = [1, 2] : tensor<2x3xf32> -> tensor<1x2xf32>{{$}}
  %3 = "step.slice"(%x) <{start = array<i64: 1, 0>, limit = array<i64: 2, 3>, strides = array<i64: 1, 2>}> : (tensor<2x3xf32>) -> tensor<1x2xf32>
  // CHECK-NEXT: step.concat %[[X]], %[[X]] dim = 1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>{{$}}
  %4 = "step.concat"(%x, %x) <{dimension = 1 : i64}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  // CHECK-NEXT: step.pad %[[V]] low = [2] high = [1] value = -1.000000e+00 : tensor<3xi32> -> tensor<6xi32>{{$}}
  %5 = "step.pad"(%v) <{low = array<i64: 2>, high = array<i64: 1>, value = -1.0 : f64}> : (tensor<3xi32>) -> tensor<6xi32>
  // CHECK-NEXT: step.iota dim = 1 : tensor<2x5xi64>{{$}}
  %6 = "step.iota"() <{dimension = 1 : i64}> : () -> tensor<2x5xi64>
  return
}

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf16>)
func.func @reductions(%x: tensor<4x8xf16>) {
  // CHECK-NEXT: step.reduce_sum %[[X]] dims = [1] : tensor<4x8xf16> -> tensor<4xf16>{{$}}
  %0 = "step.reduce_sum"(%x) <{dims = array<i64: 1>}> : (tensor<4x8xf16>) -> tensor<4xf16>
  // CHECK-NEXT: step.reduce_max %[[X]] dims = [0] keepdim : tensor<4x8xf16> -> tensor<1x8xf16>{{$}}
  %1 = "step.reduce_max"(%x) <{dims = array<i64: 0>, keepdim}> : (tensor<4x8xf16>) -> tensor<1x8xf16>
  // CHECK-NEXT: step.reduce_mean %[[X]] dims = [0, 1] : tensor<4x8xf16> -> tensor<f16>{{$}}
  %2 = "step.reduce_mean"(%x) <{dims = array<i64: 0, 1>}> : (tensor<4x8xf16>) -> tensor<f16>
  return
}

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.+]]: tensor<3x8xf32>, %[[B:.+]]: tensor<8x3xf32>)
func.func @matmul(%a: tensor<3x8xf32>, %b: tensor<8x3xf32>) {
  // CHECK-NEXT: step.matmul %[[A]], %[[B]] : tensor<3x8xf32>, tensor<8x3xf32> -> tensor<3x3xf32>{{$}}
  %0 = "step.matmul"(%a, %b) : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
  // CHECK-NEXT: step.matmul %[[A]], %[[A]] transpose_b : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x3xf32>{{$}}
  %1 = "step.matmul"(%a, %a) <{transpose_b}> : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  // CHECK-NEXT: step.matmul %[[A]], %[[A]] transpose_a : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<8x8xf32>{{$}}
  %2 = "step.matmul"(%a, %a) <{transpose_a}> : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<8x8xf32>
  // CHECK-NEXT: step.matmul %[[B]], %[[A]] transpose_a transpose_b : tensor<8x3xf32>, tensor<3x8xf32> -> tensor<3x3xf32>{{$}}
  %3 = "step.matmul"(%b, %a) <{transpose_a, transpose_b}> : (tensor<8x3xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  return
}

// CHECK-LABEL: func.func @nn
// CHECK-SAME: (%[[X:.+]]: tensor<4x10xf32>, %[[W:.+]]: tensor<10xf32>, %[[T:.+]]: tensor<4xi64>, %[[S:.+]]: tensor<i64>)
func.func @nn(%x: tensor<4x10xf32>, %w: tensor<10xf32>, %t: tensor<4xi64>, %s: tensor<i64>) {
  // CHECK-NEXT: step.softmax %[[X]] dim = 1 : tensor<4x10xf32>{{$}}
  %0 = "step.softmax"(%x) <{dimension = 1 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf32>
  // CHECK-NEXT: step.log_softmax %[[X]] dim = 0 : tensor<4x10xf32>{{$}}
  %1 = "step.log_softmax"(%x) <{dimension = 0 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf32>
  // CHECK-NEXT: step.layer_norm %[[X]], %[[W]], %[[W]] eps = 1.000000e-05 : tensor<4x10xf32>, tensor<10xf32>, tensor<10xf32>{{$}}
  %2 = "step.layer_norm"(%x, %w, %w) <{epsilon = 1.0e-05 : f64}> : (tensor<4x10xf32>, tensor<10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  // CHECK-NEXT: step.embedding %[[T]], %[[X]] : tensor<4xi64>, tensor<4x10xf32> -> tensor<4x10xf32>{{$}}
  %3 = "step.embedding"(%t, %x) : (tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf32>
  // CHECK-NEXT: step.dropout %[[X]] p = 2.500000e-01 seed = 7 : tensor<4x10xf32>{{$}}
  %4 = "step.dropout"(%x) <{p = 0.25 : f64, seed = 7 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf32>
  // CHECK-NEXT: step.dropout %[[X]] offset %[[S]] p = 2.500000e-01 seed = 7 : tensor<4x10xf32>, tensor<i64>{{$}}
  %5 = "step.dropout"(%x, %s) <{p = 0.25 : f64, seed = 7 : i64}> : (tensor<4x10xf32>, tensor<i64>) -> tensor<4x10xf32>
  return
}

// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[L:.+]]: tensor<4x10xf32>, %[[T:.+]]: tensor<4xi32>)
func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi32>) {
  // CHECK-NEXT: step.cross_entropy %[[L]], %[[T]] reduction = none : tensor<4x10xf32>, tensor<4xi32> -> tensor<4xf32>{{$}}
  %0 = "step.cross_entropy"(%l, %t) <{reduction = 0 : i32}> : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4xf32>
  // CHECK-NEXT: step.cross_entropy %[[L]], %[[T]] reduction = mean : tensor<4x10xf32>, tensor<4xi32> -> tensor<f32>{{$}}
  %1 = "step.cross_entropy"(%l, %t) <{reduction = 1 : i32}> : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  // CHECK-NEXT: step.cross_entropy %[[L]], %[[T]] reduction = sum ignore_index = 3 : tensor<4x10xf32>, tensor<4xi32> -> tensor<f32>{{$}}
  %2 = "step.cross_entropy"(%l, %t) <{reduction = 2 : i32, ignore_index = 3 : i64}> : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.+]]: tensor<2x16x8xbf16>, %[[K:.+]]: tensor<2x12x8xbf16>, %[[V:.+]]: tensor<2x12x4xbf16>)
func.func @attention(%q: tensor<2x16x8xbf16>, %k: tensor<2x12x8xbf16>, %v: tensor<2x12x4xbf16>) {
  // CHECK-NEXT: step.attention %[[Q]], %[[K]], %[[V]] : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16> -> tensor<2x16x4xbf16>{{$}}
  %0 = "step.attention"(%q, %k, %v) : (tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>) -> tensor<2x16x4xbf16>
  // CHECK-NEXT: step.attention %[[Q]], %[[K]], %[[V]] causal scale = 1.250000e-01 : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16> -> tensor<2x16x4xbf16>{{$}}
  %1 = "step.attention"(%q, %k, %v) <{causal, scale = 0.125 : f64}> : (tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>) -> tensor<2x16x4xbf16>
  return
}

// CHECK-LABEL: func.func @check_finite
// CHECK-SAME: (%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<2x3xbf16>)
func.func @check_finite(%a: tensor<4xf32>, %b: tensor<2x3xbf16>) {
  // CHECK-NEXT: step.check_finite %[[A]], %[[B]] : tensor<4xf32>, tensor<2x3xbf16>{{$}}
  %0 = "step.check_finite"(%a, %b) : (tensor<4xf32>, tensor<2x3xbf16>) -> tensor<i1>
  // CHECK-NEXT: step.check_finite %[[B]] : tensor<2x3xbf16>{{$}}
  %1 = "step.check_finite"(%b) : (tensor<2x3xbf16>) -> tensor<i1>
  return
}

// Inherent attributes in the attribute dictionary (the pre-properties generic
// form) are still accepted and become properties.
// CHECK-LABEL: func.func @attribute_dictionary
// CHECK-SAME: (%[[A:.+]]: tensor<4xf32>)
func.func @attribute_dictionary(%a: tensor<4xf32>) {
  // CHECK-NEXT: step.compare ge, %[[A]], %[[A]] : tensor<4xf32>{{$}}
  %0 = "step.compare"(%a, %a) {direction = 5 : i32} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK-NEXT: step.reduce_sum %[[A]] dims = [0] keepdim : tensor<4xf32> -> tensor<1xf32>{{$}}
  %1 = "step.reduce_sum"(%a) {dims = array<i64: 0>, keepdim} : (tensor<4xf32>) -> tensor<1xf32>
  return
}
