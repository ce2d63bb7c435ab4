// RUN: step-opt %s -split-input-file --step-layer-norm-stats | FileCheck %s

// A layer norm whose gradient recomputes its statistics (the ops
// step.layer_norm's VJP rule builds) is written out in those same ops: the
// gradient's row mean, variance and rsqrt merge into the forward's (one
// reduce_mean each, one rsqrt), and the gradient gets its own copies of the
// elementwise ops it reads (the centred x, xhat), so no [rows, cols] value
// of the forward is read by the gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: step.layer_norm
// CHECK: %[[M:.+]] = step.reduce_mean %arg0 dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
// CHECK: %[[MB:.+]] = step.broadcast_in_dim %[[M]], dims = [0]
// CHECK: %[[C:.+]] = step.sub %arg0, %[[MB]]
// CHECK: %[[CC:.+]] = step.mul %[[C]], %[[C]]
// CHECK: %[[V:.+]] = step.reduce_mean %[[CC]] dims = [1]
// CHECK: %[[EPS:.+]] = step.constant dense<9.99999974E-6> : tensor<4xf32>
// CHECK: %[[VE:.+]] = step.add %[[V]], %[[EPS]]
// CHECK: %[[R:.+]] = step.rsqrt %[[VE]]
// CHECK: %[[RB:.+]] = step.broadcast_in_dim %[[R]], dims = [0]
// CHECK: %[[XH:.+]] = step.mul %[[C]], %[[RB]]
// CHECK: %[[WB:.+]] = step.broadcast_in_dim %arg1, dims = [1]
// CHECK: %[[XW:.+]] = step.mul %[[XH]], %[[WB]]
// CHECK: %[[BB:.+]] = step.broadcast_in_dim %arg2, dims = [1]
// CHECK: %[[Y:.+]] = step.add %[[XW]], %[[BB]]
// CHECK-NOT: step.reduce_mean
// CHECK-NOT: step.rsqrt
// CHECK: %[[MB2:.+]] = step.broadcast_in_dim %[[M]], dims = [0]
// CHECK: %[[C2:.+]] = step.sub %arg0, %[[MB2]]
// CHECK: %[[RB2:.+]] = step.broadcast_in_dim %[[R]], dims = [0]
// CHECK: %[[XH2:.+]] = step.mul %[[C2]], %[[RB2]]
// CHECK: %[[GX:.+]] = step.mul %arg3, %[[XH2]]
// CHECK: %[[DW:.+]] = step.reduce_sum %[[GX]] dims = [0]
// CHECK: return %[[Y]], %[[DW]]
func.func @train_step(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %g: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>) {
  %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %m = step.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %c = step.sub %x, %mb : tensor<4x8xf32>
  %cc = step.mul %c, %c : tensor<4x8xf32>
  %v = step.reduce_mean %cc dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %e = step.constant dense<1.0e-05> : tensor<4xf32>
  %ve = step.add %v, %e : tensor<4xf32>
  %r = step.rsqrt %ve : tensor<4xf32>
  %rb = step.broadcast_in_dim %r, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %xh = step.mul %c, %rb : tensor<4x8xf32>
  %gx = step.mul %g, %xh : tensor<4x8xf32>
  %dw = step.reduce_sum %gx dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %y, %dw : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A bf16 layer norm (its gradient reads x as f32) with a checkpoint hint:
// the statistics are computed from the f32 cast, y is rounded once to
// bf16, and every op of the forward carries the hint; the gradient's copy
// does not.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: step.layer_norm
// CHECK: %[[X:.+]] = step.cast %arg0 {step.checkpoint = 1 : i64} : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
// CHECK: %[[M:.+]] = step.reduce_mean %[[X]] dims = [2] {step.checkpoint = 1 : i64}
// CHECK: %[[R:.+]] = step.rsqrt %{{.+}} {step.checkpoint = 1 : i64}
// CHECK: %[[Y:.+]] = step.cast %{{.+}} {step.checkpoint = 1 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK: %[[X2:.+]] = step.cast %arg0 : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
// CHECK: %[[MB:.+]] = step.broadcast_in_dim %[[M]], dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3x4xf32>
// CHECK: %[[C:.+]] = step.sub %[[X2]], %[[MB]] : tensor<2x3x4xf32>
// CHECK: %[[RB:.+]] = step.broadcast_in_dim %[[R]], dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3x4xf32>
// CHECK: %[[XH:.+]] = step.mul %[[C]], %[[RB]] : tensor<2x3x4xf32>
// CHECK: return %[[Y]], %[[XH]]
func.func @train_step(%x: tensor<2x3x4xbf16>, %w: tensor<4xbf16>, %b: tensor<4xbf16>)
    -> (tensor<2x3x4xbf16>, tensor<2x3x4xf32>) {
  %y = step.layer_norm %x, %w, %b eps = 1.0e-05 {step.checkpoint = 1 : i64} : tensor<2x3x4xbf16>, tensor<4xbf16>, tensor<4xbf16>
  %x32 = step.cast %x : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
  %m = step.reduce_mean %x32 dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %mb = step.broadcast_in_dim %m, dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3x4xf32>
  %c = step.sub %x32, %mb : tensor<2x3x4xf32>
  %cc = step.mul %c, %c : tensor<2x3x4xf32>
  %v = step.reduce_mean %cc dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %e = step.constant dense<1.0e-05> : tensor<2x3xf32>
  %ve = step.add %v, %e : tensor<2x3xf32>
  %r = step.rsqrt %ve : tensor<2x3xf32>
  %rb = step.broadcast_in_dim %r, dims = [0, 1] : tensor<2x3xf32> -> tensor<2x3x4xf32>
  %xh = step.mul %c, %rb : tensor<2x3x4xf32>
  return %y, %xh : tensor<2x3x4xbf16>, tensor<2x3x4xf32>
}

// -----

// Refused: a layer norm nobody differentiates, and one whose operand is
// averaged over other dims than the normalized ones, stay as they are.
// CHECK-LABEL: func.func @train_step
// CHECK: step.layer_norm %arg0
// CHECK: step.layer_norm %arg1
// CHECK: step.reduce_mean %arg1 dims = [0]
// CHECK-NOT: step.sub
func.func @train_step(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %y = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %y2 = step.layer_norm %z, %w, %w eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %m = step.reduce_mean %z dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %y, %y2, %m : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Two equal layer norms of one x, one with a hint: written out once, the
// second's readers read the first's result, and the forward's ops carry
// the hint.
// CHECK-LABEL: func.func @train_step
// CHECK: step.rsqrt %{{.+}} {step.checkpoint = 1 : i64}
// CHECK-NOT: step.rsqrt
// CHECK: %[[Y:.+]] = step.add %{{.+}}, %{{.+}} {step.checkpoint = 1 : i64} : tensor<4x8xf32>
// CHECK: %[[S:.+]] = step.add %[[Y]], %[[Y]]
// CHECK: return %[[S]]
func.func @train_step(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %y = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %y2 = step.layer_norm %x, %w, %w eps = 1.0e-05 {step.checkpoint = 1 : i64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %s = step.add %y, %y2 : tensor<4x8xf32>
  %m = step.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %s, %m : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// The model itself centres x before the layer norm (CSE keeps its ops as
// the forward's): the gradient's copies would read rstd before it is made,
// so the gradient keeps reading the forward's xhat; the IR stays valid.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[M:.+]] = step.reduce_mean %arg0 dims = [1]
// CHECK: %[[C:.+]] = step.sub %arg0, %{{.+}}
// CHECK: %[[E:.+]] = step.neg %[[C]]
// CHECK: %[[R:.+]] = step.rsqrt
// CHECK: %[[RB:.+]] = step.broadcast_in_dim %[[R]]
// CHECK: %[[XH:.+]] = step.mul %[[C]], %[[RB]]
// CHECK-NOT: step.sub %arg0
// CHECK: step.mul %arg1, %[[XH]]
func.func @train_step(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %m0 = step.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb0 = step.broadcast_in_dim %m0, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %c0 = step.sub %x, %mb0 : tensor<4x8xf32>
  %early = step.neg %c0 : tensor<4x8xf32>
  %y = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %m = step.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %c = step.sub %x, %mb : tensor<4x8xf32>
  %cc = step.mul %c, %c : tensor<4x8xf32>
  %v = step.reduce_mean %cc dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %e = step.constant dense<1.0e-05> : tensor<4xf32>
  %ve = step.add %v, %e : tensor<4xf32>
  %r = step.rsqrt %ve : tensor<4xf32>
  %rb = step.broadcast_in_dim %r, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %xh = step.mul %c, %rb : tensor<4x8xf32>
  %gx = step.mul %g, %xh : tensor<4x8xf32>
  return %y, %gx, %early : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
