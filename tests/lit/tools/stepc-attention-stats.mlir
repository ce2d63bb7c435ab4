// stepc runs step-attention-stats after inlining: the training step's
// attention saves its rows' log-sum-exp and its gradient reads it; with
// --no-attention-stats the gradient recomputes them (A/B timing), and the
// report says which.

// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=sgd --emit=mlir -o %t/saved.mlir --report=%t/saved.json
// RUN: FileCheck %s --check-prefix=SAVED < %t/saved.mlir
// RUN: FileCheck %s --check-prefix=SAVEDREPORT < %t/saved.json
// RUN: stepc %s --train --optimizer=sgd --emit=mlir --no-attention-stats -o %t/plain.mlir --report=%t/plain.json
// RUN: FileCheck %s --check-prefix=PLAIN < %t/plain.mlir
// RUN: FileCheck %s --check-prefix=PLAINREPORT < %t/plain.json

// SAVED: func.func @train_step(
// SAVED: %[[O:.+]], %[[LSE:.+]] = step.attention_lse %{{.+}} causal : {{.*}} -> tensor<2x8x4xf32>, tensor<2x8xf32>
// SAVED: step.attention_grad {{.*}} saved(%[[O]], %[[LSE]] : tensor<2x8x4xf32>, tensor<2x8xf32>) causal
// SAVEDREPORT: "attention_stats": true

// PLAIN: func.func @train_step(
// PLAIN-NOT: attention_lse
// PLAIN: step.attention %{{.+}} causal
// PLAIN-NOT: saved(
// PLAIN: step.attention_grad
// PLAINREPORT: "attention_stats": false

func.func @forward(%q: tensor<2x8x4xf32> {step.kind = "param", step.name = "q"},
                   %k: tensor<2x8x4xf32> {step.kind = "param", step.name = "k"})
    -> (tensor<f32> {step.name = "loss"}) {
  %o = step.attention %q, %k, %k causal : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x4xf32>
  %sq = step.mul %o, %o : tensor<2x8x4xf32>
  %l = step.reduce_sum %sq dims = [0, 1, 2] : tensor<2x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
