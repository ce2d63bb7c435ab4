// RUN: step-opt %s -split-input-file --step-autodiff -verify-diagnostics

// expected-error @+1 {{step-autodiff: @forward must return a scalar f32 loss (tensor<f32>) as its first result, found 'tensor<4xf32>'}}
func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"})
    -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{step-autodiff: @forward must return a scalar f32 loss (tensor<f32>) as its first result, found no results}}
func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}) {
  return
}

// -----

func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"})
    -> tensor<f32> {
  // expected-error @+1 {{step-autodiff: no VJP rule for 'arith.addf', but the loss depends on its result through a param}}
  %y = arith.addf %w, %w : tensor<2xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-warning @+1 {{step-autodiff: the loss does not depend on param 'unused'; its gradient is zero}}
func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"},
                   %u: tensor<3xf32> {step.kind = "param", step.name = "unused"})
    -> tensor<f32> {
  %l = step.reduce_sum %w dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{step-autodiff: param 'n' has type 'tensor<2xi32>', expected a float tensor}}
func.func @forward(%n: tensor<2xi32> {step.kind = "param", step.name = "n"})
    -> tensor<f32> {
  %c = step.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error @+1 {{step-autodiff: no function @forward with a body to differentiate}}
module {
  func.func @other() {
    return
  }
}
