// RUN: not step-opt %s --step-offload="mode=most" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not step-opt %s --step-offload="mode=auto link-bandwidth=0" 2>&1 | FileCheck %s --check-prefix=LINK
// RUN: not step-opt %s --step-offload="mode=auto func=nope" 2>&1 | FileCheck %s --check-prefix=FUNC
// RUN: not step-opt %s --step-fuse --step-offload="mode=auto" 2>&1 | FileCheck %s --check-prefix=FUSED

// MODE: error: step-offload: unknown mode 'most', expected none, auto or all
// LINK: error: step-offload: link-bandwidth (0{{.*}}), device-flops ({{.*}}) and memory-bandwidth ({{.*}}) must be > 0 and max-exposed (0{{.*}}) >= 0
// FUNC: error: step-offload: no function @nope with a body
// FUSED: error: step-offload: @train_step must be one block without step.fusion (run step-offload before step-fuse)

func.func @train_step(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32>, tensor<4x8xf32>) {
  %t = step.tanh %x : tensor<4x8xf32>
  %e = step.exp %t : tensor<4x8xf32>
  %loss = step.reduce_sum %e dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %g = step.mul %t, %e : tensor<4x8xf32>
  return %loss, %g : tensor<f32>, tensor<4x8xf32>
}
