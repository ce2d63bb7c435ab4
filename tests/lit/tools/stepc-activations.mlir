// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --no-fuse --emit=mlir -o %t/step.mlir --report=%t/report.json
// RUN: FileCheck %s < %t/report.json

// What the backward keeps from the forward, derived by hand: the
// cross-entropy gradient needs the logits [4, 2] (32 B); dW2 = t^T dlogits
// and tanh's gradient 1 - t^2 both need t = tanh(h) [4, 5] (80 B). h itself
// is not needed (tanh's VJP reads its result), and x is an argument, which
// lives through the step anyway.
// CHECK:      "activations": {
// CHECK-NEXT:   "largest": [
// CHECK-NEXT:     {
// CHECK-NEXT:       "bytes": 80,
// CHECK-NEXT:       "op": "tanh",
// CHECK-NEXT:       "type": "tensor<4x5xf32>"
// CHECK-NEXT:     },
// CHECK-NEXT:     {
// CHECK-NEXT:       "bytes": 32,
// CHECK-NEXT:       "op": "matmul",
// CHECK-NEXT:       "type": "tensor<4x2xf32>"
// CHECK-NEXT:     }
// CHECK-NEXT:   ],
// CHECK-NEXT:   "saved": 2,
// CHECK-NEXT:   "saved_bytes": 112
// CHECK-NEXT: },

func.func @forward(%x: tensor<4x3xf32> {step.kind = "input", step.name = "x"},
                   %y: tensor<4xi64> {step.kind = "input", step.name = "y"},
                   %w1: tensor<3x5xf32> {step.kind = "param", step.name = "w1"},
                   %w2: tensor<5x2xf32> {step.kind = "param", step.name = "w2"})
    -> tensor<f32> {
  %h = step.matmul %x, %w1 : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %t = step.tanh %h : tensor<4x5xf32>
  %logits = step.matmul %t, %w2 : tensor<4x5xf32>, tensor<5x2xf32> -> tensor<4x2xf32>
  %loss = step.cross_entropy %logits, %y reduction = mean : tensor<4x2xf32>, tensor<4xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
