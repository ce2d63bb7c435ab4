// RUN: not step-opt %s --step-amp="dtype=fp16" 2>&1 | FileCheck %s
// RUN: not step-opt %s --step-amp="dtype=bf16 loss-scale=static" 2>&1 | FileCheck %s --check-prefix=KIND

// Loss scaling multiplies an f32 loss by an f32 scale: another loss type is
// a diagnostic, not a crash.
// CHECK: error: step-amp: loss scaling needs @forward to return a scalar f32 loss first, found 'tensor<f16>'
// KIND: step-amp: loss-scale 'static' is not auto, none or dynamic
func.func @forward(%x: tensor<2x2xf16> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf16> {step.kind = "param", step.name = "w"})
    -> (tensor<f16> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<2x2xf16>, tensor<2x2xf16> -> tensor<2x2xf16>
  %l = step.reduce_mean %m dims = [0, 1] : tensor<2x2xf16> -> tensor<f16>
  return %l : tensor<f16>
}
