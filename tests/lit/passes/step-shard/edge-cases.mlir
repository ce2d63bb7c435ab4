// RUN: split-file %s %t
// RUN: step-opt %t/unused.mlir --step-autodiff --step-optimizer --step-shard="mode=zero3 world-size=2" 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: step-opt %t/mixed.mlir --step-autodiff --step-optimizer --step-shard="mode=dp world-size=2 bucket-bytes=1000" | FileCheck %s --check-prefix=MIXED
// RUN: step-opt %t/scalar.mlir --step-autodiff --step-optimizer="optimizer=sgd momentum=0.9" --step-shard="mode=zero1 world-size=2 overlap=false" | FileCheck %s --check-prefix=SCALAR

// A param the loss ignores has a constant zero gradient, which inlining
// does not fold away from under the pass: it is scattered like the others.
// UNUSED: warning: step-autodiff: the loss does not depend on param 'u'
// UNUSED-LABEL: func.func @train_step(
// UNUSED-SAME: %arg1: tensor<5xf32> {step.full_shape = array<i64: 3, 3>, step.kind = "param", step.name = "u"}
// UNUSED: step.reduce_scatter %{{.+}} : tensor<10xf32> -> tensor<5xf32>

// Buckets hold one element type: the bf16 and the f32 gradient are
// reduced separately, not concatenated.
// MIXED-LABEL: func.func @train_step(
// MIXED-NOT: step.concat
// MIXED-DAG: step.all_reduce %{{.+}} : tensor<3x2xbf16> -> tensor<3x2xbf16>
// MIXED-DAG: step.all_reduce %{{.+}} : tensor<2xf32> -> tensor<2xf32>

// A rank-0 param is a block of 1 like its momentum buffer; the update's
// step counter and learning rate stay scalars.
// SCALAR-LABEL: func.func @train_step(
// SCALAR-SAME: %arg4: tensor<1xf32> {step.full_shape = array<i64>, step.kind = "state", step.name = "opt.momentum_buffer.t"}
// SCALAR: %[[P:.+]] = step.local_shard %arg1 {{.*}} : tensor<f32> -> tensor<1xf32>
// SCALAR-NEXT: %[[G:.+]] = step.local_shard %{{.+}} : tensor<f32> -> tensor<1xf32>
// SCALAR-NEXT: step.sgd_update %[[P]], %[[G]], %{{.+}}, %{{.+}} momentum_buffer %arg4 {{.*}} : (tensor<1xf32>, tensor<1xf32>, tensor<i64>, tensor<f32>, tensor<1xf32>)

//--- unused.mlir
func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %u: tensor<3x3xf32> {step.kind = "param", step.name = "u"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- mixed.mlir
func.func @forward(%w: tensor<3x2xbf16> {step.kind = "param", step.name = "w"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"},
                   %x: tensor<4x3xbf16> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xbf16>
  %y32 = step.cast %y : tensor<4x2xbf16> -> tensor<4x2xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<4x2xf32>
  %z = step.add %y32, %bb : tensor<4x2xf32>
  %l = step.reduce_mean %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- scalar.mlir
func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %t: tensor<f32> {step.kind = "param", step.name = "t"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %tb = step.broadcast_in_dim %t, dims = [] : tensor<f32> -> tensor<4x2xf32>
  %z = step.mul %y, %tb : tensor<4x2xf32>
  %l = step.reduce_mean %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
