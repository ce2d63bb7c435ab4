// stepc --guard-finite: the artifact records the guard in its meta and the
// op locations in its plan; without --train it is refused.

// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --guard-finite --no-kernels -o %t/g.step --report=%t/r.json
// RUN: grep -a -o '"guard":{[^}]*}' %t/g.step | FileCheck %s --check-prefix=META
// RUN: grep -a -o '"location":"[^"]*","op":"step.log"' %t/g.step | FileCheck %s --check-prefix=LOC
// RUN: FileCheck %s --check-prefix=REPORT < %t/r.json
// RUN: stepc %s --train --no-kernels -o %t/plain.step
// RUN: not grep -a -c '"guard":{' %t/plain.step
// RUN: not stepc %s --guard-finite -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=NOTRAIN
// RUN: not ls %t/bad.step

// META: "guard":{"finite":"guard.finite"}
// LOC: "location":"{{.*}}stepc-guard-finite.mlir:[[#@LINE+8]]:8","op":"step.log"
// REPORT: "guard_finite": true
// NOTRAIN: stepc: --guard-finite needs --train
func.func @forward(%w: tensor<3xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %wb = step.broadcast_in_dim %w, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %p = step.mul %wb, %x : tensor<4x3xf32>
  %l = step.log %p : tensor<4x3xf32>
  %m = step.reduce_mean %l dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %m : tensor<f32>
}
