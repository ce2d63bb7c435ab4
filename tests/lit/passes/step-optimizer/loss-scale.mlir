// RUN: step-opt %s --step-amp="dtype=fp16 growth-interval=100" --step-autodiff --step-optimizer --canonicalize | FileCheck %s

// Dynamic loss scaling in @train_step: the state amp.loss_scale (zero on a
// fresh start, meaning init-scale) scales the loss inside the call, the
// loss and gradients are unscaled, one check_finite covers every gradient,
// a non-finite step keeps params, optimizer state and opt.step, and the
// scale and amp.growth_tracker follow GradScaler.update.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: step.matmul {{.+}} -> tensor<2x2xf16>
// CHECK: step.mul %{{.+}}, %arg2 : tensor<f32>
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: step.name = "w"
// CHECK-SAME: step.name = "opt.step"
// CHECK-SAME: {step.kind = "state", step.name = "amp.loss_scale"}
// CHECK-SAME: {step.kind = "state", step.name = "amp.growth_tracker"}
// CHECK-SAME: {step.kind = "input", step.name = "x"}
// CHECK-SAME: -> (tensor<f32> {step.name = "loss"}
// CHECK-SAME: step.name = "amp.loss_scale"
// CHECK-SAME: step.name = "amp.growth_tracker"
// CHECK: step.compare eq, %[[S0:[^,]+]], %{{.+}} : tensor<f32>
// CHECK: %[[S:.+]] = step.select %{{.+}}, %{{.+}}, %[[S0]] : tensor<i1>, tensor<f32>
// CHECK: call @forward_backward(%{{.+}}, %{{.+}}, %[[S]])
// CHECK: %[[INV:.+]] = step.div %{{.+}}, %[[S]] : tensor<f32>
// CHECK: %[[OK:.+]] = step.check_finite %{{.+}} : tensor<2x2xf32>
// CHECK: step.adamw_update
// CHECK: step.select %{{.+}}, %{{.+}}, %arg0 : tensor<2x2xi1>, tensor<2x2xf32>
// CHECK: step.compare ge, %{{.+}}, %{{.+}} : tensor<i64>
// CHECK: return
func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %l = step.reduce_mean %m dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
