// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --offload=all --emit=mlir -o %t/step.mlir --report=%t/report.json
// RUN: FileCheck %s --check-prefix=REPORT < %t/report.json
// RUN: FileCheck %s --check-prefix=IR < %t/step.mlir
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --offload=all --no-kernels -o %t/step.step
// RUN: strings %t/step.step | FileCheck %s --check-prefix=ARTIFACT
// RUN: not stepc %s --train --offload=most -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not stepc %s --train --offload=auto,link=0 -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=LINK
// RUN: not ls %t/bad.step
// RUN: stepc %s --train --offload-optimizer --no-kernels -o %t/zo.step --report=%t/zo.json
// RUN: FileCheck %s --check-prefix=ZO-REPORT < %t/zo.json
// RUN: strings %t/zo.step | FileCheck %s --check-prefix=ZO-ARTIFACT
// RUN: not stepc %s --train --offload-optimizer --remat-budget=1M -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=ZO-BUDGET
// RUN: not stepc %s --offload-optimizer -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=ZO-TRAIN
// RUN: not ls %t/bad.step

// t1 = tanh(x w1) [64, 16] f32 is read by the backward only after the big
// [64, 256] values of the second layer are gone (for the gradient of w1's
// tanh and of w2); moving it to host memory between the forward and that
// use lowers the planned peak. The report's offload section says so.
// REPORT:      "offload": {
// REPORT:        "candidates": {{[1-9]}},
// REPORT:        "host_bytes": {{[1-9][0-9]*}},
// REPORT:        "mode": "all",
// REPORT:        "offloaded": {{[1-9]}},

// IR: step.offload
// IR: step.reload

// The artifact's plan has a host arena and host buffers.
// ARTIFACT-DAG: "host_bytes":{{[1-9]}}
// ARTIFACT-DAG: "kind":"host"

// MODE: stepc: --offload: unknown mode 'most', expected none, auto or all
// LINK: stepc: --offload: link = 0 must be positive

func.func @forward(%x: tensor<64x16xf32> {step.kind = "input", step.name = "x"},
                   %w1: tensor<16x16xf32> {step.kind = "param", step.name = "w1"},
                   %w2: tensor<16x256xf32> {step.kind = "param", step.name = "w2"})
    -> tensor<f32> {
  %h1 = step.matmul %x, %w1 : tensor<64x16xf32>, tensor<16x16xf32> -> tensor<64x16xf32>
  %t1 = step.tanh %h1 : tensor<64x16xf32>
  %h2 = step.matmul %t1, %w2 : tensor<64x16xf32>, tensor<16x256xf32> -> tensor<64x256xf32>
  %t2 = step.tanh %h2 : tensor<64x256xf32>
  %loss = step.reduce_sum %t2 dims = [0, 1] : tensor<64x256xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// --offload-optimizer (ZeRO-Offload, docs/distributed.md): AdamW's two
// moments of w1 [16, 16] and w2 [16, 256] f32 plus the 8-byte counter stay
// on the host (2 * 4 * 4352 + 8 bytes), and so do the params (17408 B);
// both gradients go out and both params come in each step.
// ZO-REPORT:      "offload_optimizer": {
// ZO-REPORT-NEXT:   "host_ops": {{[1-9]}},
// ZO-REPORT-NEXT:   "offloaded_bytes": 174{{[0-9][0-9]}},
// ZO-REPORT-NEXT:   "offloads": {{[1-9]}},
// ZO-REPORT-NEXT:   "params_bytes": 17408,
// ZO-REPORT-NEXT:   "reloaded_bytes": 17408,
// ZO-REPORT-NEXT:   "reloads": 2,
// ZO-REPORT-NEXT:   "state_bytes": 34824,
// ZO-REPORT-NEXT:   "updates": 1
// ZO-REPORT:      "pass": "step-offload-optimizer"

// The plan marks the host memory and the host steps.
// ZO-ARTIFACT-DAG: "memory":"host"
// ZO-ARTIFACT-DAG: "host":true
// ZO-ARTIFACT-DAG: "offload_optimizer":{"host_ops":{{[1-9]}}

// ZO-BUDGET: stepc: --offload-optimizer and --remat-budget cannot be combined
// ZO-TRAIN: stepc: --offload-optimizer needs --train
