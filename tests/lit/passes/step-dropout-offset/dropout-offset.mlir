// RUN: step-opt %s -split-input-file --step-dropout-offset | FileCheck %s

// The forward's dropout and its VJP's (same seed) both read opt.step; a
// dropout that already has an offset keeps it.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4xf32> {step.kind = "param", step.name = "w"}
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<i64> {step.kind = "state", step.name = "opt.step"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {step.kind = "input", step.name = "x"}
// CHECK-SAME: %[[K:[a-z0-9]+]]: tensor<i64> {step.kind = "input", step.name = "k"}
// CHECK-SAME: step.dropout_offset = 2 : i64
// CHECK-NEXT: %[[D:.+]] = step.dropout %[[X]] offset %[[T]] p = 5.000000e-01 seed = 3 : tensor<4xf32>, tensor<i64>
// CHECK-NEXT: %[[Y:.+]] = step.mul %[[W]], %[[D]]
// CHECK-NEXT: %[[G:.+]] = step.dropout %[[W]] offset %[[T]] p = 5.000000e-01 seed = 3 : tensor<4xf32>, tensor<i64>
// CHECK-NEXT: %[[E:.+]] = step.dropout %[[X]] offset %[[K]] p = 2.500000e-01 seed = 9 : tensor<4xf32>, tensor<i64>
func.func @train_step(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}, %t: tensor<i64> {step.kind = "state", step.name = "opt.step"}, %x: tensor<4xf32> {step.kind = "input", step.name = "x"}, %k: tensor<i64> {step.kind = "input", step.name = "k"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %d = step.dropout %x p = 0.5 seed = 3 : tensor<4xf32>
  %y = step.mul %w, %d : tensor<4xf32>
  %g = step.dropout %w p = 0.5 seed = 3 : tensor<4xf32>
  %e = step.dropout %x offset %k p = 0.25 seed = 9 : tensor<4xf32>, tensor<i64>
  return %y, %g, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// No dropout: nothing changes, no attribute.
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: step.dropout_offset
// CHECK: return
func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = step.neg %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A micro-batch index from step-grad-accum (offset %j, marked
// step.micro_batches = 4) becomes opt.step * 4 + j.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<i64> {step.kind = "state", step.name = "opt.step"}
// CHECK:      %[[K:.+]] = step.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[TK:.+]] = step.mul %[[T]], %[[K]] : tensor<i64>
// CHECK-NEXT: %[[O:.+]] = step.add %[[TK]], %[[J:.+]] : tensor<i64>
// CHECK-NEXT: step.dropout %{{.+}} offset %[[O]] p = 5.000000e-01 seed = 3 : tensor<4xf32>, tensor<i64>
// CHECK-NOT:  step.micro_batches
func.func @train_step(%t: tensor<i64> {step.kind = "state", step.name = "opt.step"}, %x: tensor<4xf32> {step.kind = "input", step.name = "x"}) -> tensor<4xf32> {
  %j = step.constant dense<1> : tensor<i64>
  %d = step.dropout %x offset %j p = 0.5 seed = 3 {step.micro_batches = 4 : i64} : tensor<4xf32>, tensor<i64>
  return %d : tensor<4xf32>
}
