// RUN: step-opt %s -split-input-file -verify-diagnostics --step-attention-stats

// No training step to rewrite.
// expected-error @+1 {{step-attention-stats: no function @train_step with a body}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
