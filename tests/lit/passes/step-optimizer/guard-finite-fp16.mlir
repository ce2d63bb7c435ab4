// RUN: step-opt %s --step-amp="dtype=fp16" --step-autodiff --step-optimizer="guard-finite=true" --canonicalize | FileCheck %s

// Under fp16 dynamic loss scaling an overflowing gradient is a skipped
// step, not a fault: the guard is check_finite(unscaled loss), and-ed with
// the scaler's gradient check only once the scale is <= 1.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<i1> {step.name = "guard.finite"})
// CHECK-DAG: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SCALE:.+]] = step.select %{{.+}}, %{{.+}}, %arg{{[0-9]+}} : tensor<i1>, tensor<f32>
// CHECK: %[[FB:.+]]:2 = call @forward_backward(%{{.+}}, %{{.+}}, %[[SCALE]])
// CHECK: %[[INV:.+]] = step.div %[[ONE]], %[[SCALE]] : tensor<f32>
// CHECK: %[[LOSS:.+]] = step.mul %[[FB]]#0, %[[INV]] : tensor<f32>
// CHECK: %[[GRADS:.+]] = step.check_finite %{{.+}} : tensor<2x2xf32>
// CHECK: %[[LOSSOK:.+]] = step.check_finite %[[LOSS]] : tensor<f32>
// CHECK: %[[BOTH:.+]] = step.select %[[LOSSOK]], %[[GRADS]], %[[LOSSOK]] : tensor<i1>, tensor<i1>
// CHECK: %[[FLOOR:.+]] = step.compare le, %[[SCALE]], %[[ONE]] : tensor<f32>
// CHECK: %[[GUARD:.+]] = step.select %[[FLOOR]], %[[BOTH]], %[[LOSSOK]] : tensor<i1>, tensor<i1>
// CHECK: step.adamw_update
// CHECK: return %[[LOSS]], {{.+}}, %[[GUARD]] : {{.+}}, tensor<i1>
func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %l = step.reduce_mean %m dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
