// RUN: not step-opt %s --step-autodiff --step-optimizer="optimizer=lamb" --step-shard="mode=zero1 world-size=2" 2>&1 | FileCheck %s --check-prefix=LAMB
// RUN: not step-opt %s --step-shard="mode=dp world-size=2" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero4 world-size=2" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not step-opt %s --step-autodiff --step-optimizer --step-shard="mode=dp world-size=0" 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: step-opt %s --step-autodiff --step-optimizer="optimizer=lamb" --step-shard="mode=dp world-size=2" | FileCheck %s --check-prefix=LAMBDP

// LAMB's trust ratio needs whole params: ZeRO refuses it, dp does not.
// LAMB: error: step-shard: mode zero1 cannot shard LAMB: its trust ratio needs the norm of the whole param (use dp, or adamw / sgd)
// LAMBDP: step.lamb_update
// ORDER: error: step-shard: no @train_step; run step-optimizer first
// MODE: error: step-shard: unknown mode 'zero4', expected none, dp, zero1, zero2 or zero3
// WORLD: error: step-shard: world-size = 0 must be >= 1
func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
