// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero2 world-size=2" | FileCheck %s
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero3 world-size=2" | FileCheck %s --check-prefix=Z3

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

// zero3: one gather per use, right before it: w2 is gathered for the
// forward matmul and again for the backward's input gradient.
// Z3-LABEL: func.func @train_step(
// Z3: %[[A:.+]] = step.all_gather %arg1 {{.*}} : tensor<3xf32> -> tensor<6xf32>
// Z3-NEXT: %[[W:.+]] = step.reshape %[[A]] : tensor<6xf32> -> tensor<3x2xf32>
// Z3-NEXT: step.matmul %{{.+}}, %[[W]] : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
// Z3: %[[B:.+]] = step.all_gather %arg1 {{.*}} : tensor<3xf32> -> tensor<6xf32>
// Z3-NEXT: %[[W2:.+]] = step.reshape %[[B]] : tensor<6xf32> -> tensor<3x2xf32>
// Z3-NEXT: step.matmul %{{.+}}, %[[W2]] transpose_b : tensor<4x2xf32>, tensor<3x2xf32> -> tensor<4x3xf32>
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
