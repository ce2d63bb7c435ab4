// REQUIRES: codegen
// stepc --dump-kernels writes one <kernel>.cu per distinct generated
// kernel: here the loop fusion of the backward and the multi-tensor kernels.

// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=sgd --clip=1.0 --no-kernels -o %t/m.step --dump-kernels=%t/kernels
// RUN: ls %t/kernels | FileCheck %s --check-prefix=FILES
// RUN: cat %t/kernels/fusion_*.cu | FileCheck %s --check-prefix=SOURCE
// With --buckets (several plans) it is refused, and nothing is written.
// RUN: not stepc %s --train --buckets=T:4 --no-kernels -o %t/bad.step --dump-kernels=%t/bad 2>&1 | FileCheck %s --check-prefix=BUCKETS
// RUN: not ls %t/bad
// RUN: not ls %t/bad.step

// BUCKETS: stepc: error: --dump-kernels writes one plan's kernels; it does not combine with --buckets

// FILES-DAG: fusion_{{[0-9a-f]+}}.cu
// SOURCE: extern "C" __global__
func.func @forward(%w: tensor<16xf32> {step.kind = "param", step.name = "w"},
                   %v: tensor<16xf32> {step.kind = "param", step.name = "v"},
                   %x: tensor<16xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %a = step.mul %w, %x : tensor<16xf32>
  %t = step.tanh %a : tensor<16xf32>
  %b = step.mul %t, %v : tensor<16xf32>
  %l = step.reduce_sum %b dims = [0] : tensor<16xf32> -> tensor<f32>
  return %l : tensor<f32>
}
