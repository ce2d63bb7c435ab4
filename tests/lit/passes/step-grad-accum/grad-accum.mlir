// RUN: step-opt %s --step-autodiff --step-grad-accum=k=3 | FileCheck %s
// RUN: step-opt %s --step-autodiff --step-grad-accum=k=1 | FileCheck %s --check-prefix=ONE
// RUN: not step-opt %s --step-grad-accum=k=0 2>&1 | FileCheck %s --check-prefix=ZERO

// k = 3: the input's batch dim triples, params keep their type, the micro
// function is called on three row slices, losses and gradients are summed
// and divided by 3; the forward extra result is dropped.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[W:.+]]: tensor<3x2xf32> {step.kind = "param", step.name = "w"}
// CHECK-SAME: %[[X:.+]]: tensor<12x3xf32> {step.kind = "input", step.name = "x"}
// CHECK-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<3x2xf32> {step.kind = "grad", step.name = "grad.w"})
// CHECK: %[[X0:.+]] = step.slice %[[X]] start = [0, 0] limit = [4, 3]
// CHECK: %[[R0:.+]]:3 = call @forward_backward_micro(%[[W]], %[[X0]])
// CHECK: %[[X1:.+]] = step.slice %[[X]] start = [4, 0] limit = [8, 3]
// CHECK: %[[R1:.+]]:3 = call @forward_backward_micro(%[[W]], %[[X1]])
// CHECK: %[[L01:.+]] = step.add %[[R0]]#0, %[[R1]]#0
// CHECK: %[[G01:.+]] = step.add %[[R0]]#2, %[[R1]]#2
// CHECK: %[[X2:.+]] = step.slice %[[X]] start = [8, 0] limit = [12, 3]
// CHECK: %[[R2:.+]]:3 = call @forward_backward_micro(%[[W]], %[[X2]])
// CHECK: %[[L:.+]] = step.add %[[L01]], %[[R2]]#0
// CHECK: %[[G:.+]] = step.add %[[G01]], %[[R2]]#2
// CHECK: %[[K:.+]] = step.constant dense<3.000000e+00> : tensor<f32>
// CHECK: %[[LM:.+]] = step.div %[[L]], %[[K]]
// CHECK: %[[KG:.+]] = step.constant dense<3.000000e+00> : tensor<3x2xf32>
// CHECK: %[[GM:.+]] = step.div %[[G]], %[[KG]]
// CHECK: return %[[LM]], %[[GM]]
// CHECK-LABEL: func.func private @forward_backward_micro(
// CHECK-SAME: tensor<4x3xf32>

// ONE-LABEL: func.func @forward_backward(
// ONE-SAME: tensor<4x3xf32>
// ONE-NOT: forward_backward_micro

// ZERO: step-grad-accum: k = 0 must be >= 1
func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}, tensor<4x3xf32> {step.name = "out1"}) {
  %xw = step.broadcast_in_dim %x, dims = [0, 1] : tensor<4x3xf32> -> tensor<4x3xf32>
  %ws = step.reduce_sum %w dims = [1] : tensor<3x2xf32> -> tensor<3xf32>
  %wb = step.broadcast_in_dim %ws, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %p = step.mul %xw, %wb : tensor<4x3xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4x3xf32>
}
