// RUN: step-opt %s --step-amp="dtype=fp16" | FileCheck %s
// RUN: step-opt %s --step-amp="dtype=bf16 loss-scale=dynamic init-scale=1024 growth-interval=10" | FileCheck %s --check-prefix=FORCED
// RUN: not step-opt %s --step-amp="dtype=fp32" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not step-opt %s --step-amp="dtype=fp16 backoff-factor=2" 2>&1 | FileCheck %s --check-prefix=FACTOR

// fp16 gets dynamic loss scaling by default: a state argument
// amp.loss_scale multiplies the loss that step-autodiff differentiates, and
// step.amp carries GradScaler's options for step-optimizer.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[S:[^:]+]]: tensor<f32> {step.kind = "state", step.name = "amp.loss_scale"}
// CHECK-SAME: step.amp = {backoff_factor = 5.000000e-01 : f64, dtype = "fp16", growth_factor = 2.000000e+00 : f64, growth_interval = 2000 : i64, init_scale = 6.553600e+04 : f64, loss_scale = "dynamic"}
// CHECK: step.matmul {{.+}} -> tensor<2x2xf16>
// CHECK: %[[L:.+]] = step.reduce_mean
// CHECK: %[[SL:.+]] = step.mul %[[L]], %[[S]] : tensor<f32>
// CHECK: return %[[SL]]
// bf16 may force it.
// FORCED: step.amp = {backoff_factor = 5.000000e-01 : f64, dtype = "bf16", growth_factor = 2.000000e+00 : f64, growth_interval = 10 : i64, init_scale = 1.024000e+03 : f64, loss_scale = "dynamic"}
// DTYPE: step-amp: dtype 'fp32' is not bf16 or fp16
// FACTOR: step-amp: init-scale > 0, growth-factor > 1, 0 < backoff-factor < 1 and growth-interval >= 1 are required
func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %l = step.reduce_mean %m dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
