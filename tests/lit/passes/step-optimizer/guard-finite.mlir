// RUN: step-opt %s --step-autodiff --step-optimizer="optimizer=sgd clip=1.0 guard-finite=true" --canonicalize | FileCheck %s --check-prefix=PLAIN
// RUN: step-opt %s --step-autodiff --step-optimizer | FileCheck %s --check-prefix=OFF

// guard-finite: @train_step also returns "guard.finite" (last), one
// check_finite over the loss and every gradient, taken before clipping
// (whose global norm would spread one NaN into every gradient).
// PLAIN-LABEL: func.func @train_step(
// PLAIN-SAME: -> ({{.+}}, tensor<i64> {step.kind = "state", step.name = "opt.step"}, tensor<i1> {step.name = "guard.finite"})
// PLAIN: %[[FB:.+]]:3 = call @forward_backward(
// PLAIN-NEXT: %[[OK:.+]] = step.check_finite %[[FB]]#0, %[[FB]]#1, %[[FB]]#2 : tensor<f32>, tensor<2x2xf32>, tensor<2xf32>
// PLAIN: step.reduce_sum
// PLAIN: step.sgd_update
// PLAIN: return %[[FB]]#0, {{.+}}, %[[OK]] : {{.+}}, tensor<i1>

// Without the option: no guard result, no check.
// OFF-LABEL: func.func @train_step(
// OFF-NOT: guard.finite
// OFF-NOT: step.check_finite
// OFF: return
func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<2x2xf32>
  %s = step.add %m, %bb : tensor<2x2xf32>
  %l = step.reduce_mean %s dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
