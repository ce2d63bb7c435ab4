// RUN: step-opt %s -split-input-file --step-attention-stats | FileCheck %s

// An attention whose gradient is taken saves its log-sum-exp; the gradient
// reads the result and the log-sum-exp instead of recomputing them. Other
// users of the result keep reading it.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: step.attention %
// CHECK: %[[O:.+]], %[[LSE:.+]] = step.attention_lse %arg0, %arg1, %arg2 causal : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>, tensor<2x16xf32>
// CHECK: %[[M:.+]] = step.mul %[[O]], %[[O]]
// CHECK: step.attention_grad %arg0, %arg1, %arg2, %[[M]] saved(%[[O]], %[[LSE]] : tensor<2x16x8xf32>, tensor<2x16xf32>) causal : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
func.func @train_step(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>)
    -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>) {
  %o = step.attention %q, %k, %v causal : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>
  %g = step.mul %o, %o : tensor<2x16x8xf32>
  %d:3 = step.attention_grad %q, %k, %v, %g causal : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
  return %g, %d#0 : tensor<2x16x8xf32>, tensor<2x16x8xf32>
}

// -----

// A valid length, bf16, a scale: the same rewrite, operands and attributes
// carried over; the log-sum-exp is f32.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[O:.+]], %[[LSE:.+]] = step.attention_lse %arg0, %arg0, %arg0 valid %arg1 scale = 5.000000e-01 : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<i64> -> tensor<4x8x16xbf16>, tensor<4x8xf32>
// CHECK: step.attention_grad %arg0, %arg0, %arg0, %[[O]] valid %arg1 saved(%[[O]], %[[LSE]] : tensor<4x8x16xbf16>, tensor<4x8xf32>) scale = 5.000000e-01 :
func.func @train_step(%q: tensor<4x8x16xbf16>, %l: tensor<i64>) -> tensor<4x8x16xbf16> {
  %o = step.attention %q, %q, %q valid %l scale = 0.5 : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<i64> -> tensor<4x8x16xbf16>
  %d:3 = step.attention_grad %q, %q, %q, %o valid %l scale = 0.5 : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<i64> -> tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>
  return %d#0 : tensor<4x8x16xbf16>
}

// -----

// Refused: a gradient of another attention (other scale, no causal mask)
// and an attention nobody differentiates stay as they are.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: attention_lse
// CHECK-NOT: saved
// CHECK: step.attention %arg0, %arg0, %arg0 causal
// CHECK: step.attention_grad %arg0, %arg0, %arg0, %{{.+}} scale = 2.500000e-01 :
// CHECK: step.attention_grad %arg0, %arg0, %arg0, %{{.+}} :
func.func @train_step(%q: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  %o = step.attention %q, %q, %q causal : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>
  %a:3 = step.attention_grad %q, %q, %q, %o causal scale = 0.25 : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  %b:3 = step.attention_grad %q, %q, %q, %o : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  return %a#0, %b#0 : tensor<2x8x4xf32>, tensor<2x8x4xf32>
}

// -----

// Two gradients of one attention (CSE left them apart) share its statistics.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[O:.+]], %[[LSE:.+]] = step.attention_lse
// CHECK: step.attention_grad {{.*}} saved(%[[O]], %[[LSE]] : {{.*}}) causal
// CHECK: step.attention_grad {{.*}} saved(%[[O]], %[[LSE]] : {{.*}}) causal
func.func @train_step(%q: tensor<2x8x4xf32>, %g: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  %o = step.attention %q, %q, %q causal : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>
  %a:3 = step.attention_grad %q, %q, %q, %o causal : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  %b:3 = step.attention_grad %q, %q, %q, %g causal : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  return %a#0, %b#1 : tensor<2x8x4xf32>, tensor<2x8x4xf32>
}
