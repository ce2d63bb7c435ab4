// RUN: step-opt %s -split-input-file --step-fuse | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse="multi-tensor=false" | FileCheck %s --check-prefix=OFF
// RUN: step-opt %s -split-input-file --step-fuse="max-tensors=2" | FileCheck %s --check-prefix=TWO

// The gradient-norm clip and the SGD updates of three params, as
// step-optimizer writes them: the three full reductions and the scalar
// epilogue are one multi_tensor fusion, the three updates with their
// `g * coef` prologues another.
// CHECK-LABEL: func.func @clip_sgd
// CHECK: %[[N:.+]] = step.fusion "multi_tensor"
// CHECK-COUNT-3: step.reduce_sum
// CHECK: step.sqrt
// CHECK: step.yield %{{.+}} : tensor<f32>
// CHECK: %[[U:.+]]:3 = step.fusion "multi_tensor"(%[[N]],
// CHECK-COUNT-3: step.sgd_update
// CHECK: step.yield
// CHECK: return %[[U]]#0, %[[U]]#1, %[[U]]#2
// OFF-LABEL: func.func @clip_sgd
// OFF-NOT: "multi_tensor"
// OFF-COUNT-3: step.sgd_update
// With two tensors per fusion the first two sums and their part of the
// running total are one multi_tensor fusion, the third sum with the rest of
// the scalar math a reduction fusion, and the updates two multi_tensor
// fusions.
// TWO-LABEL: func.func @clip_sgd
// TWO: step.fusion "multi_tensor"
// TWO-COUNT-2: step.reduce_sum
// TWO: step.fusion "reduction"
// TWO: step.sqrt
// TWO: step.fusion "multi_tensor"
// TWO-COUNT-2: step.sgd_update
// TWO: step.yield
// TWO: step.fusion "multi_tensor"
// TWO-NEXT: ^bb0
// TWO-NEXT: step.broadcast_in_dim
// TWO-NEXT: step.mul
// TWO-NEXT: step.sgd_update
// TWO-NEXT: step.yield
func.func @clip_sgd(%p0: tensor<8xf32>, %p1: tensor<4x4xf32>, %p2: tensor<3xf32>,
                    %g0: tensor<8xf32>, %g1: tensor<4x4xf32>, %g2: tensor<3xf32>,
                    %t: tensor<i64>, %lr: tensor<f32>) -> (tensor<8xf32>, tensor<4x4xf32>, tensor<3xf32>) {
  %zero = step.constant dense<0.0> : tensor<f32>
  %eps = step.constant dense<1.0e-6> : tensor<f32>
  %clip = step.constant dense<1.0> : tensor<f32>
  %q0 = step.mul %g0, %g0 : tensor<8xf32>
  %r0 = step.reduce_sum %q0 dims = [0] : tensor<8xf32> -> tensor<f32>
  %s0 = step.add %zero, %r0 : tensor<f32>
  %q1 = step.mul %g1, %g1 : tensor<4x4xf32>
  %r1 = step.reduce_sum %q1 dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %s1 = step.add %s0, %r1 : tensor<f32>
  %q2 = step.mul %g2, %g2 : tensor<3xf32>
  %r2 = step.reduce_sum %q2 dims = [0] : tensor<3xf32> -> tensor<f32>
  %s2 = step.add %s1, %r2 : tensor<f32>
  %n = step.sqrt %s2 : tensor<f32>
  %d = step.add %n, %eps : tensor<f32>
  %c = step.div %clip, %d : tensor<f32>
  %c0 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<8xf32>
  %h0 = step.mul %g0, %c0 : tensor<8xf32>
  %c1 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<4x4xf32>
  %h1 = step.mul %g1, %c1 : tensor<4x4xf32>
  %c2 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<3xf32>
  %h2 = step.mul %g2, %c2 : tensor<3xf32>
  %u0 = step.sgd_update %p0, %h0, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  %u1 = step.sgd_update %p1, %h1, %t, %lr : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>, tensor<f32>) -> tensor<4x4xf32>
  %u2 = step.sgd_update %p2, %h2, %t, %lr : (tensor<3xf32>, tensor<3xf32>, tensor<i64>, tensor<f32>) -> tensor<3xf32>
  return %u0, %u1, %u2 : tensor<8xf32>, tensor<4x4xf32>, tensor<3xf32>
}

// -----

// Only the clip's pattern is a norm group: float full sums added into one
// running total. Integer sums, and a sum that depends on another, are not
// merged into a multi_tensor fusion.
// CHECK-LABEL: func.func @not_norms
// CHECK-NOT: "multi_tensor"
// CHECK: step.reduce_sum %arg0
// CHECK: step.fusion "reduction"
// CHECK: step.fusion "reduction"
// CHECK-NOT: "multi_tensor"
// OFF-LABEL: func.func @not_norms
// TWO-LABEL: func.func @not_norms
func.func @not_norms(%a: tensor<16xi32>, %g: tensor<16xf32>) -> (tensor<i32>, tensor<f32>) {
  %ra = step.reduce_sum %a dims = [0] : tensor<16xi32> -> tensor<i32>
  %sq = step.mul %g, %g : tensor<16xf32>
  %s1 = step.reduce_sum %sq dims = [0] : tensor<16xf32> -> tensor<f32>
  %n = step.sqrt %s1 : tensor<f32>
  %b = step.broadcast_in_dim %n, dims = [] : tensor<f32> -> tensor<16xf32>
  %h = step.mul %g, %b : tensor<16xf32>
  %h2 = step.mul %h, %h : tensor<16xf32>
  %s2 = step.reduce_sum %h2 dims = [0] : tensor<16xf32> -> tensor<f32>
  %z = step.add %s1, %s2 : tensor<f32>
  return %ra, %z : tensor<i32>, tensor<f32>
}

// -----

// AMP's copies of the parameters (phase 5): casts of arguments that the
// matmuls read stored become one multi_tensor fusion, outlined before the
// first matmul; the cast that a loop fusion copies (its only user) is
// left to that fusion; a cast of a computed value is no parameter copy.
// CHECK-LABEL: func.func @param_casts
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xbf16>, %[[W0:[^:]+]]: tensor<8x8xf32>, %[[W1:[^:]+]]: tensor<8x16xf32>, %[[B:[^:]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[C:.+]]:2 = step.fusion "multi_tensor"(%[[W0]], %[[W1]]) : (tensor<8x8xf32>, tensor<8x16xf32>) -> (tensor<8x8xbf16>, tensor<8x16xbf16>)
// CHECK-NEXT: ^bb0(%[[A0:[^:]+]]: tensor<8x8xf32>, %[[A1:[^:]+]]: tensor<8x16xf32>):
// CHECK-NEXT: %[[K0:.+]] = step.cast %[[A0]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[K1:.+]] = step.cast %[[A1]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-NEXT: step.yield %[[K0]], %[[K1]]
// CHECK: %[[M0:.+]] = step.matmul %[[X]], %[[C]]#0
// CHECK: step.fusion "loop"(%[[B]], %[[M0]])
// CHECK-NEXT: ^bb0(%[[LB:[^:]+]]: tensor<4x8xf32>
// CHECK-NEXT: step.cast %[[LB]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: step.matmul %{{.+}}, %[[C]]#1
// OFF-LABEL: func.func @param_casts
// OFF-NOT: "multi_tensor"
func.func @param_casts(%x: tensor<4x8xbf16>, %w0: tensor<8x8xf32>, %w1: tensor<8x16xf32>, %b: tensor<4x8xf32>) -> tensor<4x16xbf16> {
  %c0 = step.cast %w0 : tensor<8x8xf32> -> tensor<8x8xbf16>
  %m0 = step.matmul %x, %c0 : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %cb = step.cast %b : tensor<4x8xf32> -> tensor<4x8xbf16>
  %h = step.add %m0, %cb : tensor<4x8xbf16>
  %e = step.exp %h : tensor<4x8xbf16>
  %c1 = step.cast %w1 : tensor<8x16xf32> -> tensor<8x16xbf16>
  %m1 = step.matmul %e, %c1 : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  return %m1 : tensor<4x16xbf16>
}

// -----

// Copies made before their own first use hold at most 16 MB a fusion: the
// two 32 MB copies read at the same matmul are one fusion; the third,
// read later, would be made 32 MB early and stays a cast of its own.
// CHECK-LABEL: func.func @cast_extension
// CHECK-NEXT: %[[C:.+]]:2 = step.fusion "multi_tensor"
// CHECK: %[[M:.+]] = step.matmul %[[C]]#{{[01]}}, %[[C]]#{{[01]}}
// CHECK-NEXT: %[[L:.+]] = step.cast %{{.+}} : tensor<4096x4096xf32> -> tensor<4096x4096xbf16>
// CHECK-NEXT: step.matmul %[[M]], %[[L]]
func.func @cast_extension(%a: tensor<4096x4096xf32>, %b: tensor<4096x4096xf32>, %c: tensor<4096x4096xf32>) -> tensor<4096x4096xbf16> {
  %ca = step.cast %a : tensor<4096x4096xf32> -> tensor<4096x4096xbf16>
  %cb = step.cast %b : tensor<4096x4096xf32> -> tensor<4096x4096xbf16>
  %m = step.matmul %ca, %cb : tensor<4096x4096xbf16>, tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %cc = step.cast %c : tensor<4096x4096xf32> -> tensor<4096x4096xbf16>
  %r = step.matmul %m, %cc : tensor<4096x4096xbf16>, tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  return %r : tensor<4096x4096xbf16>
}

// -----

// A cast to its own type is no copy to make: it stays out of the group.
// CHECK-LABEL: func.func @identity_cast
// CHECK-NEXT: %[[C:.+]]:2 = step.fusion "multi_tensor"(%{{.+}}, %{{.+}}) : (tensor<8x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xbf16>, tensor<8x8xbf16>)
// CHECK: step.cast %{{.+}} : tensor<8x8xf32> -> tensor<8x8xf32>
func.func @identity_cast(%w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<8x8xbf16>, tensor<8x8xf32>) {
  %c0 = step.cast %w0 : tensor<8x8xf32> -> tensor<8x8xbf16>
  %c1 = step.cast %w1 : tensor<8x8xf32> -> tensor<8x8xbf16>
  %m = step.matmul %c0, %c1 : tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<8x8xbf16>
  %c2 = step.cast %w2 : tensor<8x8xf32> -> tensor<8x8xf32>
  %n = step.matmul %c2, %c2 : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %m, %n : tensor<8x8xbf16>, tensor<8x8xf32>
}
