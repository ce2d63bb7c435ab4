// RUN: step-opt %s --step-remat="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: step-opt %s --step-remat="mode=auto" | FileCheck %s --check-prefix=AUTO
// RUN: step-opt %s --step-remat="mode=auto fuse=false" | FileCheck %s --check-prefix=AUTO

// The backward reads two forward values: t = tanh(h * bb) and the
// broadcast bias bb. bb is a view of a param (which lives anyway), so the
// min-cut recomputes it in the backward for free; t is kept, since keeping
// y or h instead would cost as many bytes and recompute more (ties go to
// the cut closest to the backward). The matmul is never recomputed.

// NONE-LABEL: func.func @train_step
// NONE-SAME:  step.remat = {{{.*}}mode = "none"{{.*}}recomputed_ops = 0
// NONE-NOT:   step.recomputed

// AUTO-LABEL: func.func @train_step
// AUTO-SAME:  step.remat = {{{.*}}mode = "auto"{{.*}}recomputed_flops = 32 : i64, recomputed_ops = 1 : i64, saved_bytes_after = 128 : i64, saved_bytes_before = 256 : i64
// AUTO:      %[[H:.*]] = step.matmul %arg0, %arg1
// AUTO-NEXT: %[[BB:.*]] = step.broadcast_in_dim %arg2, dims = [1] :
// AUTO-NEXT: %[[Y:.*]] = step.mul %[[H]], %[[BB]]
// AUTO-NEXT: %[[T:.*]] = step.tanh %[[Y]]
// AUTO-NEXT: %[[LOSS:.*]] = step.reduce_sum %[[T]]
// AUTO:      %[[T2:.*]] = step.mul %[[T]], %[[T]]
// AUTO-NEXT: %[[DT:.*]] = step.sub %{{.*}}, %[[T2]]
// AUTO-NEXT: %[[BB2:.*]] = step.broadcast_in_dim %arg2, dims = [1] {step.recomputed}
// AUTO-NEXT: %[[DH:.*]] = step.mul %[[DT]], %[[BB2]]
// AUTO-NOT:  step.tanh
// AUTO:      return %[[LOSS]], %[[DH]]

func.func @train_step(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"},
                      %w: tensor<8x8xf32> {step.kind = "param", step.name = "w"},
                      %b: tensor<8xf32> {step.kind = "param", step.name = "b"})
    -> (tensor<f32>, tensor<4x8xf32>) {
  %h = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = step.mul %h, %bb : tensor<4x8xf32>
  %t = step.tanh %y : tensor<4x8xf32>
  %loss = step.reduce_sum %t dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<4x8xf32>
  %t2 = step.mul %t, %t : tensor<4x8xf32>
  %dt = step.sub %one, %t2 : tensor<4x8xf32>
  %dh = step.mul %dt, %bb : tensor<4x8xf32>
  return %loss, %dh : tensor<f32>, tensor<4x8xf32>
}
