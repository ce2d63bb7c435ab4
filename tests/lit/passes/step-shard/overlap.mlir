// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero2 world-size=2" | FileCheck %s
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero3 world-size=2 prefetch=false" | FileCheck %s --check-prefix=Z3
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=dp world-size=2 bucket-bytes=1000" | FileCheck %s --check-prefix=BDP
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero2 world-size=2 bucket-bytes=1000" | FileCheck %s --check-prefix=BZ2
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero2 world-size=2 bucket-bytes=24" | FileCheck %s --check-prefix=SMALL

// With overlap (the default) the backward is inlined and each gradient's
// reduce_scatter follows the op that computes the gradient: w2's gradient
// (the last layer) is scattered before the backward reaches w1.
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: call @forward_backward
// CHECK: %[[G2:.+]] = step.matmul %{{.+}}, %{{.+}} transpose_a : tensor<4x3xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
// CHECK-NEXT: %[[F2:.+]] = step.reshape %[[G2]] : tensor<3x2xf32> -> tensor<6xf32>
// CHECK-NEXT: step.reduce_scatter %[[F2]] {{.*}} : tensor<6xf32> -> tensor<3xf32>
// CHECK: %[[G1:.+]] = step.matmul %{{.+}}, %{{.+}} transpose_a : tensor<4x5xf32>, tensor<4x3xf32> -> tensor<5x3xf32>
// CHECK-NEXT: %[[F1:.+]] = step.reshape %[[G1]] : tensor<5x3xf32> -> tensor<15xf32>
// CHECK-NEXT: %[[P1:.+]] = step.pad %[[F1]] low = [0] high = [1]
// CHECK-NEXT: step.reduce_scatter %[[P1]] {{.*}} : tensor<16xf32> -> tensor<8xf32>

// zero3 without prefetch: one gather per use, right before it: w2 is gathered for the
// forward matmul and again for the backward's input gradient.
// Z3-LABEL: func.func @train_step(
// Z3: %[[A:.+]] = step.all_gather %arg1 {{.*}} : tensor<3xf32> -> tensor<6xf32>
// Z3-NEXT: %[[W:.+]] = step.reshape %[[A]] : tensor<6xf32> -> tensor<3x2xf32>
// Z3-NEXT: step.matmul %{{.+}}, %[[W]] : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
// Z3: %[[B:.+]] = step.all_gather %arg1 {{.*}} : tensor<3xf32> -> tensor<6xf32>
// Z3-NEXT: %[[W2:.+]] = step.reshape %[[B]] : tensor<6xf32> -> tensor<3x2xf32>
// Z3-NEXT: step.matmul %{{.+}}, %[[W2]] transpose_b : tensor<4x2xf32>, tensor<3x2xf32> -> tensor<4x3xf32>
// Buckets: both gradients (24 + 60 bytes) in one of 1000 bytes, reduced
// once where the later one (w1's) is ready, then sliced apart.
// BDP-LABEL: func.func @train_step(
// BDP: %[[J:.+]] = step.concat %{{.+}}, %{{.+}} dim = 0 : tensor<6xf32>, tensor<15xf32> -> tensor<21xf32>
// BDP-NEXT: %[[R:.+]] = step.all_reduce %[[J]] {{.*}}reduce = "mean"{{.*}} : tensor<21xf32> -> tensor<21xf32>
// BDP-NEXT: step.slice %[[R]] start = [0] limit = [6]
// BDP: step.slice %[[R]] start = [6] limit = [21]
// BDP-NOT: step.all_reduce %{{.+}} : tensor<{{[0-9]+}}x

// zero2: each padded gradient as [2, S] blocks side by side, so the
// replica's half of the bucket is its block of each gradient (3 + 8).
// BZ2-LABEL: func.func @train_step(
// BZ2: %[[A:.+]] = step.reshape %{{.+}} : tensor<6xf32> -> tensor<2x3xf32>
// BZ2-NEXT: %[[B:.+]] = step.reshape %{{.+}} : tensor<16xf32> -> tensor<2x8xf32>
// BZ2-NEXT: %[[J:.+]] = step.concat %[[A]], %[[B]] dim = 1 : tensor<2x3xf32>, tensor<2x8xf32> -> tensor<2x11xf32>
// BZ2-NEXT: %[[F:.+]] = step.reshape %[[J]] : tensor<2x11xf32> -> tensor<22xf32>
// BZ2-NEXT: %[[S:.+]] = step.reduce_scatter %[[F]] {{.*}} : tensor<22xf32> -> tensor<11xf32>
// BZ2-NEXT: step.slice %[[S]] start = [0] limit = [3] strides = [1] : tensor<11xf32> -> tensor<3xf32>
// BZ2-NEXT: step.slice %[[S]] start = [3] limit = [11] strides = [1] : tensor<11xf32> -> tensor<8xf32>
// BZ2-NOT: step.reduce_scatter

// A bucket closes once it holds bucket-bytes: w2's 24 bytes fill one.
// SMALL-LABEL: func.func @train_step(
// SMALL-NOT: step.concat
// SMALL-COUNT-2: step.reduce_scatter
// SMALL-NOT: step.reduce_scatter
// SMALL-NOT: step.concat

func.func @forward(%w1: tensor<5x3xf32> {step.kind = "param", step.name = "w1"},
                   %w2: tensor<3x2xf32> {step.kind = "param", step.name = "w2"},
                   %x: tensor<4x5xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %h = step.matmul %x, %w1 : tensor<4x5xf32>, tensor<5x3xf32> -> tensor<4x3xf32>
  %r = step.tanh %h : tensor<4x3xf32>
  %y = step.matmul %r, %w2 : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
