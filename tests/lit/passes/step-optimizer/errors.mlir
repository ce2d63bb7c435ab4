// RUN: step-opt %s -split-input-file --step-optimizer -verify-diagnostics
// RUN: not step-opt %s --step-autodiff --step-optimizer="optimizer=rmsprop" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not step-opt %s --step-autodiff --step-optimizer="schedule=cosine warmup=10 total=10" 2>&1 | FileCheck %s --check-prefix=TOTAL
// RUN: not step-opt %s --step-autodiff --step-optimizer="optimizer=adamw momentum=0.9" 2>&1 | FileCheck %s --check-prefix=MOMENTUM


// KIND: step-optimizer: unknown optimizer 'rmsprop', expected sgd, adamw or lamb
// TOTAL: step-optimizer: schedule 'cosine' needs total (10) > warmup (10)
// MOMENTUM: step-optimizer: momentum, dampening and nesterov are SGD options

// expected-error @+1 {{step-optimizer: no @forward_backward; run step-autodiff first}}
module {
  func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"})
      -> tensor<f32> {
    %l = step.reduce_sum %w dims = [0] : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
