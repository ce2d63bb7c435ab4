// RUN: step-opt %s -split-input-file --step-autodiff | FileCheck %s

// The loss sum(w * x): the forward is kept, the gradient of w is x times
// the broadcast seed, and nothing is computed for the input x.
// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[W:.+]]: tensor<4xf32> {step.kind = "param", step.name = "w"}
// CHECK-SAME: %[[X:.+]]: tensor<4xf32> {step.kind = "input", step.name = "x"}
// CHECK-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "grad", step.name = "grad.w"})
// CHECK: %[[Y:.+]] = step.mul %[[W]], %[[X]]
// CHECK: %[[L:.+]] = step.reduce_sum %[[Y]]
// CHECK: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[B:.+]] = step.broadcast_in_dim %[[ONE]], dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK: %[[G:.+]] = step.mul %[[B]], %[[X]]
// CHECK-NOT: step.mul
// CHECK: return %[[L]], %[[G]]
func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %y = step.mul %w, %x : tensor<4xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A value used twice gets the sum of both cotangents; extra forward results
// are returned before the gradients.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<3xf32> {step.name = "out1"}, tensor<3xf32> {step.kind = "grad", step.name = "grad.w"})
// CHECK: %[[S:.+]] = step.mul %[[W:.+]], %[[W]]
// CHECK: %[[G1:.+]] = step.mul %[[B:.+]], %[[W]]
// CHECK: %[[G2:.+]] = step.mul %[[B]], %[[W]]
// CHECK: %[[ACC:.+]] = step.add %[[G1]], %[[G2]]
// CHECK: return %{{.+}}, %[[S]], %[[ACC]]
func.func @forward(%w: tensor<3xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}, tensor<3xf32> {step.name = "out1"}) {
  %s = step.mul %w, %w : tensor<3xf32>
  %l = step.reduce_sum %s dims = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %s : tensor<f32>, tensor<3xf32>
}

// -----

// stop_gradient cuts the path: only the direct use of w contributes.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: step.stop_gradient
// CHECK-NOT: step.add
// CHECK: return
func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"})
    -> tensor<f32> {
  %c = step.stop_gradient %w : tensor<2xf32>
  %y = step.mul %w, %c : tensor<2xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
