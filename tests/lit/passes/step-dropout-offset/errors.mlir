// RUN: step-opt %s -split-input-file -verify-diagnostics --step-dropout-offset

// A dropout but no step counter to key it by.
func.func @train_step(%x: tensor<4xf32> {step.kind = "input", step.name = "x"}) -> tensor<4xf32> {
  // expected-error @+1 {{step-dropout-offset: @train_step has no opt.step argument of type tensor<i64> to draw a new mask per update from (run step-optimizer first)}}
  %d = step.dropout %x p = 0.5 seed = 3 : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// No training step at all.
// expected-error @+1 {{step-dropout-offset: no function @train_step with a body}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
