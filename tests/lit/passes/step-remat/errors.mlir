// RUN: not step-opt %s --step-remat="mode=most" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not step-opt %s --step-remat="mode=max budget=100" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not step-opt %s --step-remat="mode=budget" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not step-opt %s --step-remat="func=nope" 2>&1 | FileCheck %s --check-prefix=NOFUNC
// RUN: not step-opt %s --step-fuse --step-remat 2>&1 | FileCheck %s --check-prefix=FUSED

// MODE: error: step-remat: unknown mode 'most', expected none, auto, max or budget
// BUDGET: error: step-remat: mode budget needs budget > 0 bytes and only it takes one
// NOFUNC: error: step-remat: no function @nope with a body
// FUSED: error: step-remat: @train_step must be one block without step.fusion (run step-remat before step-fuse)

func.func @train_step(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32>, tensor<4x8xf32>) {
  %t = step.tanh %x : tensor<4x8xf32>
  %e = step.exp %t : tensor<4x8xf32>
  %loss = step.reduce_sum %e dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %d = step.mul %e, %t : tensor<4x8xf32>
  return %loss, %d : tensor<f32>, tensor<4x8xf32>
}
