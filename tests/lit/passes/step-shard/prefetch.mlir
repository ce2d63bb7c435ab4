// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero3 world-size=2" | FileCheck %s
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero3 world-size=2 prefetch=false" | FileCheck %s --check-prefix=OFF

// zero3 prefetch, one layer ahead. Layers come from the param names
// (layers.0, layers.1, layers.2). The gathers of layers.0 and layers.1 are
// issued before layers.0's first matmul; layers.2's where layers.1
// starts; the backward's layers.1 gather where layers.2 starts. layers.2
// is read by the forward and then by the backward with no other layer in
// between: one visit, so it is gathered once.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[A0:.+]] = step.all_gather %arg0 {{.*}} : tensor<10xf32> -> tensor<20xf32>
// CHECK-NEXT: %[[W0:.+]] = step.reshape %[[A0]] : tensor<20xf32> -> tensor<5x4xf32>
// CHECK-NEXT: %[[B0:.+]] = step.all_gather %arg1 {{.*}} : tensor<2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[A1:.+]] = step.all_gather %arg2 {{.*}} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[W1:.+]] = step.reshape %[[A1]] : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT: step.matmul %arg13, %[[W0]] : tensor<3x5xf32>, tensor<5x4xf32>
// CHECK-NEXT: step.broadcast_in_dim %[[B0]]
// CHECK: %[[A2:.+]] = step.all_gather %arg3 {{.*}} : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[W2:.+]] = step.reshape %[[A2]] : tensor<8xf32> -> tensor<4x2xf32>
// CHECK-NEXT: step.matmul %{{.+}}, %[[W1]] : tensor<3x4xf32>, tensor<4x4xf32>
// CHECK-NEXT: step.tanh
// CHECK-NEXT: %[[A1B:.+]] = step.all_gather %arg2 {{.*}} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[W1B:.+]] = step.reshape %[[A1B]] : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT: step.matmul %{{.+}}, %[[W2]] : tensor<3x4xf32>, tensor<4x2xf32>
// CHECK-NOT: step.all_gather %arg3
// CHECK: step.matmul %{{.+}}, %[[W2]] transpose_b : tensor<3x2xf32>, tensor<4x2xf32>
// CHECK: step.matmul %{{.+}}, %[[W1B]] transpose_b : tensor<3x4xf32>, tensor<4x4xf32>
// CHECK-NOT: step.all_gather

// Without prefetch: each gather right before its one use, layers.2 twice.
// OFF-LABEL: func.func @train_step(
// OFF: step.tanh
// OFF-NEXT: %[[A1:.+]] = step.all_gather %arg2
// OFF-NEXT: %[[W1:.+]] = step.reshape %[[A1]]
// OFF-NEXT: step.matmul %{{.+}}, %[[W1]] : tensor<3x4xf32>, tensor<4x4xf32>
// OFF: step.all_gather %arg3
// OFF: step.all_gather %arg3
// OFF-NOT: step.all_gather %arg3

func.func @forward(%w0: tensor<5x4xf32> {step.kind = "param", step.name = "layers.0.weight"},
                   %b0: tensor<4xf32> {step.kind = "param", step.name = "layers.0.bias"},
                   %w1: tensor<4x4xf32> {step.kind = "param", step.name = "layers.1.weight"},
                   %w2: tensor<4x2xf32> {step.kind = "param", step.name = "layers.2.weight"},
                   %x: tensor<3x5xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %m0 = step.matmul %x, %w0 : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  %bb = step.broadcast_in_dim %b0, dims = [1] : tensor<4xf32> -> tensor<3x4xf32>
  %h0 = step.add %m0, %bb : tensor<3x4xf32>
  %t0 = step.tanh %h0 : tensor<3x4xf32>
  %h1 = step.matmul %t0, %w1 : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %t1 = step.tanh %h1 : tensor<3x4xf32>
  %y = step.matmul %t1, %w2 : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
