// RUN: step-opt %s -split-input-file --step-pad-dynamic=sizes=T=16 | FileCheck %s

// Types become the bucket size, a len.T input is appended, and an
// elementwise op needs no mask.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16xf32> {step.dims = ["", "T"], step.kind = "input", step.name = "x"}
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64> {step.kind = "input", step.len_of = "T", step.name = "len.T"}
// CHECK-SAME: -> (tensor<f32>, tensor<2x16xf32> {step.dims = ["", "T"]})
// CHECK-SAME: attributes {step.buckets = {T = 16 : i64}}
// CHECK: %[[E:.+]] = step.exp %[[X]] : tensor<2x16xf32>
// CHECK-NOT: step.select
// CHECK: return %{{.+}}, %[[E]]
func.func @forward(%x: tensor<2x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> (tensor<f32>, tensor<2x?xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %e = step.exp %x : tensor<2x?xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %e : tensor<f32>, tensor<2x?xf32>
}

// -----

// reduce_sum over the padded dim reads zeros where iota >= len.T.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64>
// CHECK: %[[I:.+]] = step.iota dim = 0 : tensor<16xi64>
// CHECK: %[[L:.+]] = step.broadcast_in_dim %[[LEN]], dims = [] : tensor<i64> -> tensor<16xi64>
// CHECK: %[[V:.+]] = step.compare lt, %[[I]], %[[L]]
// CHECK: %[[M:.+]] = step.broadcast_in_dim %[[V]], dims = [1] : tensor<16xi1> -> tensor<2x16xi1>
// CHECK: %[[Z:.+]] = step.constant dense<0.000000e+00> : tensor<2x16xf32>
// CHECK: %[[S:.+]] = step.select %[[M]], %[[X]], %[[Z]]
// CHECK: step.reduce_sum %[[S]] dims = [1]
func.func @forward(%x: tensor<2x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %r = step.reduce_sum %x dims = [1] : tensor<2x?xf32> -> tensor<2xf32>
  %s = step.reduce_sum %r dims = [0] : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A reduction over a static dim of a padded value needs no mask.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: step.select
// CHECK: step.reduce_sum %{{.+}} dims = [0] : tensor<2x16xf32> -> tensor<16xf32>
func.func @forward(%x: tensor<2x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> (tensor<f32>, tensor<?xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %r = step.reduce_sum %x dims = [0] : tensor<2x?xf32> -> tensor<?xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %r : tensor<f32>, tensor<?xf32>
}

// -----

// reduce_mean becomes a masked sum divided by the valid count 2 * len.T.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64>
// CHECK: %[[S:.+]] = step.reduce_sum %{{.+}} dims = [0, 1] : tensor<2x16xf32> -> tensor<f32>
// CHECK: %[[TWO:.+]] = step.constant dense<2> : tensor<i64>
// CHECK: %[[N:.+]] = step.mul %[[TWO]], %[[LEN]] : tensor<i64>
// CHECK: %[[F:.+]] = step.cast %[[N]] : tensor<i64> -> tensor<f32>
// CHECK: %[[M:.+]] = step.div %[[S]], %[[F]]
// CHECK-NOT: step.reduce_mean
// CHECK: return %[[M]]
func.func @forward(%x: tensor<2x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %m = step.reduce_mean %x dims = [0, 1] : tensor<2x?xf32> -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// softmax and reduce_max along the padded dim read -inf there.
// CHECK-LABEL: func.func @forward
// CHECK: %[[NI:.+]] = step.constant dense<0xFF800000> : tensor<3x16xf32>
// CHECK: %[[S:.+]] = step.select %{{.+}}, %{{.+}}, %[[NI]]
// CHECK: step.softmax %[[S]] dim = 1
// CHECK: %[[NI2:.+]] = step.constant dense<0xFF800000> : tensor<3x16xf32>
// CHECK: %[[S2:.+]] = step.select %{{.+}}, %{{.+}}, %[[NI2]]
// CHECK: step.reduce_max %[[S2]] dims = [1]
func.func @forward(%x: tensor<3x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]})
    -> (tensor<f32>, tensor<3x?xf32>, tensor<3xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %p = step.softmax %x dim = 1 : tensor<3x?xf32>
  %m = step.reduce_max %x dims = [1] : tensor<3x?xf32> -> tensor<3xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %p, %m : tensor<f32>, tensor<3x?xf32>, tensor<3xf32>
}

// -----

// A matmul contracting over T zeroes both operands' padding; one whose T is
// a row dim needs nothing.
// CHECK-LABEL: func.func @forward
// CHECK: %[[A:.+]] = step.select %{{.+}}, %{{.+}}, %{{.+}} : tensor<16x4xi1>, tensor<16x4xf32>
// CHECK: %[[B:.+]] = step.select %{{.+}}, %{{.+}}, %{{.+}} : tensor<16x5xi1>, tensor<16x5xf32>
// CHECK: step.matmul %[[A]], %[[B]] transpose_a : tensor<16x4xf32>, tensor<16x5xf32> -> tensor<4x5xf32>
// CHECK-NOT: step.select
// CHECK: step.matmul %{{.+}}, %{{.+}} : tensor<16x4xf32>, tensor<4x5xf32> -> tensor<16x5xf32>
func.func @forward(%x: tensor<?x4xf32> {step.kind = "input", step.name = "x", step.dims = ["T", ""]},
                   %y: tensor<?x5xf32> {step.kind = "input", step.name = "y", step.dims = ["T", ""]},
                   %w: tensor<4x5xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32>, tensor<4x5xf32>, tensor<?x5xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %g = step.matmul %x, %y transpose_a : tensor<?x4xf32>, tensor<?x5xf32> -> tensor<4x5xf32>
  %h = step.matmul %x, %w : tensor<?x4xf32>, tensor<4x5xf32> -> tensor<?x5xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %g, %h : tensor<f32>, tensor<4x5xf32>, tensor<?x5xf32>
}

// -----

// A reshape merging B and T keeps T as a factor: the mask of the merged
// dim is built over [2, 16] and reshaped; cross_entropy's padded rows get
// ignore_index, so its mean counts the valid rows only.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64>
// CHECK: %[[I:.+]] = step.iota dim = 1 : tensor<2x16xi64>
// CHECK: %[[V:.+]] = step.compare lt, %[[I]], %{{.+}} : tensor<2x16xi64>
// CHECK: %[[R:.+]] = step.reshape %[[V]] : tensor<2x16xi1> -> tensor<32xi1>
// CHECK: %[[IGN:.+]] = step.constant dense<-100> : tensor<32xi64>
// CHECK: %[[Y:.+]] = step.select %{{.+}}, %{{.+}}, %[[IGN]] : tensor<32xi1>, tensor<32xi64>
// CHECK: step.cross_entropy %{{.+}}, %[[Y]] reduction = mean : tensor<32x7xf32>, tensor<32xi64> -> tensor<f32>
func.func @forward(%x: tensor<2x?x7xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T", ""]},
                   %y: tensor<2x?xi64> {step.kind = "input", step.name = "y", step.dims = ["", "T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %a = step.reshape %x : tensor<2x?x7xf32> -> tensor<?x7xf32>
  %b = step.reshape %y : tensor<2x?xi64> -> tensor<?xi64>
  %l = step.cross_entropy %a, %b reduction = mean : tensor<?x7xf32>, tensor<?xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A symbolic iota (positions 0..T-1) becomes static; causal attention whose
// queries and keys are both T takes len.T as its valid length (its kernels
// skip padded tiles). Without sizes, the bucket is the maximum.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64> {step.kind = "input", step.len_of = "T"
// CHECK: step.iota dim = 0 : tensor<16xi64>
// CHECK-NOT: step.dims
// CHECK: step.attention %arg0, %arg0, %arg0 valid %[[LEN]] causal : tensor<1x16x8xf32>, tensor<1x16x8xf32>, tensor<1x16x8xf32>, tensor<i64> -> tensor<1x16x8xf32>
func.func @forward(%q: tensor<1x?x8xf32> {step.kind = "input", step.name = "q", step.dims = ["", "T", ""]})
    -> (tensor<f32>, tensor<?xi64>, tensor<1x?x8xf32>) attributes {step.symbols = {T = 64 : i64}} {
  %i = step.iota dim = 0 {step.dims = ["T"]} : tensor<?xi64>
  %o = step.attention %q, %q, %q causal : tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32> -> tensor<1x?x8xf32>
  %c = step.constant dense<0.0> : tensor<f32>
  return %c, %i, %o : tensor<f32>, tensor<?xi64>, tensor<1x?x8xf32>
}

// -----

// Non-causal attention over padded queries and keys stays one op: the
// valid length masks the padded keys (no [.., T, T] scores in memory).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64> {step.kind = "input", step.len_of = "T"
// CHECK-NOT: step.matmul
// CHECK: step.attention %arg0, %arg0, %arg0 valid %[[LEN]] : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<i64> -> tensor<2x16x8xf32>
// CHECK-NOT: step.softmax
func.func @forward(%q: tensor<2x?x8xf32> {step.kind = "input", step.name = "q", step.dims = ["", "T", ""]})
    -> tensor<2x?x8xf32> attributes {step.symbols = {T = 64 : i64}} {
  %o = step.attention %q, %q, %q : tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  return %o : tensor<2x?x8xf32>
}

// -----

// Non-causal attention of static queries over padded keys is written out:
// q k^T, the scale, padded keys at -inf before the softmax, and P @ V with
// padded rows 0.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: step.attention
// CHECK: %[[S:.*]] = step.matmul %arg0, %arg1 transpose_b : tensor<2x4x8xf32>, tensor<2x16x8xf32> -> tensor<2x4x16xf32>
// CHECK: %[[SC:.*]] = step.mul %[[S]], %{{.*}} : tensor<2x4x16xf32>
// CHECK: %[[I:.*]] = step.iota dim = 0 : tensor<16xi64>
// CHECK: %[[V:.*]] = step.compare lt, %[[I]], %{{.*}} : tensor<16xi64>
// CHECK: %[[M:.*]] = step.broadcast_in_dim %[[V]], dims = [2] : tensor<16xi1> -> tensor<2x4x16xi1>
// CHECK: %[[NI:.*]] = step.constant dense<0xFF800000> : tensor<2x4x16xf32>
// CHECK: %[[MS:.*]] = step.select %[[M]], %[[SC]], %[[NI]]
// CHECK: %[[P:.*]] = step.softmax %[[MS]] dim = 2
// CHECK: %[[MV:.*]] = step.select %{{.*}}, %arg1, %{{.*}} : tensor<2x16x8xi1>, tensor<2x16x8xf32>
// CHECK: step.matmul %{{.*}}, %[[MV]] : tensor<2x4x16xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
// CHECK-NOT: step.attention
func.func @forward(%q: tensor<2x4x8xf32> {step.kind = "input", step.name = "q"},
                   %k: tensor<2x?x8xf32> {step.kind = "input", step.name = "k", step.dims = ["", "T", ""]})
    -> tensor<2x4x8xf32> attributes {step.symbols = {T = 64 : i64}} {
  %o = step.attention %q, %k, %k : tensor<2x4x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Causal attention of static queries over padded keys: the causal mask
// (key j > query i hidden) and the padding mask both apply.
// CHECK-LABEL: func.func @forward
// CHECK: step.matmul %arg0, %arg1 transpose_b : tensor<2x4x8xf32>, tensor<2x16x8xf32> -> tensor<2x4x16xf32>
// CHECK: %[[R:.*]] = step.iota dim = 0 : tensor<4x16xi64>
// CHECK: %[[C:.*]] = step.iota dim = 1 : tensor<4x16xi64>
// CHECK: step.compare gt, %[[C]], %[[R]] : tensor<4x16xi64>
// CHECK: step.compare lt
// CHECK: step.softmax
// CHECK: step.matmul {{.*}} -> tensor<2x4x8xf32>
// CHECK-NOT: step.attention
func.func @forward(%q: tensor<2x4x8xf32> {step.kind = "input", step.name = "q"},
                   %k: tensor<2x?x8xf32> {step.kind = "input", step.name = "k", step.dims = ["", "T", ""]})
    -> tensor<2x4x8xf32> attributes {step.symbols = {T = 64 : i64}} {
  %o = step.attention %q, %k, %k causal : tensor<2x4x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// layer_norm over a padded dim: mean and variance sum valid positions only
// and divide by len.T; the weight (a scalar broadcast) takes T's layout.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[LEN:[a-z0-9]+]]: tensor<i64> {step.kind = "input", step.len_of = "T"
// CHECK-NOT: step.layer_norm
// CHECK: %[[W:.*]] = step.broadcast_in_dim %arg1, dims = [] : tensor<f32> -> tensor<16xf32>
// CHECK: %[[N:.*]] = step.mul %{{.*}}, %[[LEN]] : tensor<i64>
// CHECK: %[[NF:.*]] = step.cast %[[N]] : tensor<i64> -> tensor<f32>
// CHECK: %[[X0:.*]] = step.select %{{.*}}, %arg0, %{{.*}} : tensor<4x16xi1>, tensor<4x16xf32>
// CHECK: %[[SUM:.*]] = step.reduce_sum %[[X0]] dims = [1] : tensor<4x16xf32> -> tensor<4xf32>
// CHECK: %[[MEAN:.*]] = step.div %[[SUM]], %{{.*}} : tensor<4xf32>
// CHECK: %[[CEN:.*]] = step.sub %arg0, %{{.*}} : tensor<4x16xf32>
// CHECK: %[[SQ:.*]] = step.mul %[[CEN]], %[[CEN]]
// CHECK: %[[SQ0:.*]] = step.select %{{.*}}, %[[SQ]], %{{.*}} : tensor<4x16xi1>, tensor<4x16xf32>
// CHECK: step.reduce_sum %[[SQ0]] dims = [1]
// CHECK: step.rsqrt
// CHECK: step.broadcast_in_dim %[[W]], dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NOT: step.layer_norm
func.func @forward(%x: tensor<4x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]},
                   %g: tensor<f32> {step.kind = "param", step.name = "g"})
    -> tensor<4x?xf32> attributes {step.symbols = {T = 64 : i64}} {
  %w = step.broadcast_in_dim %g, dims = [] : tensor<f32> -> tensor<?xf32>
  %o = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x?xf32>, tensor<?xf32>, tensor<?xf32>
  return %o : tensor<4x?xf32>
}
