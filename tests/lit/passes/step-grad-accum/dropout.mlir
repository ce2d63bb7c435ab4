// RUN: step-opt %s --step-autodiff --step-grad-accum=k=2 | FileCheck %s

// With dropout, the micro function takes the micro-batch index as a last
// argument and feeds it to its dropouts (here the forward's; x has no
// gradient, so there is no VJP dropout) as their offset, marked
// step.micro_batches = 2; call j passes the constant j.
// CHECK-LABEL: func.func @forward_backward(
// CHECK:      %[[J0:.+]] = step.constant dense<0> : tensor<i64>
// CHECK-NEXT: call @forward_backward_micro(%{{.+}}, %{{.+}}, %[[J0]])
// CHECK:      %[[J1:.+]] = step.constant dense<1> : tensor<i64>
// CHECK-NEXT: call @forward_backward_micro(%{{.+}}, %{{.+}}, %[[J1]])
// CHECK-LABEL: func.func private @forward_backward_micro(
// CHECK-SAME: %[[J:[a-z0-9]+]]: tensor<i64> {step.name = "micro_batch"})
// CHECK:      step.dropout %{{.+}} offset %[[J]] p = 5.000000e-01 seed = 3 {step.micro_batches = 2 : i64} : tensor<4x3xf32>, tensor<i64>
func.func @forward(%w: tensor<4x3xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"}) -> tensor<f32> {
  %d = step.dropout %x p = 0.5 seed = 3 : tensor<4x3xf32>
  %y = step.mul %w, %d : tensor<4x3xf32>
  %l = step.reduce_sum %y dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
