// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --remat=auto --emit=mlir -o %t/step.mlir --report=%t/report.json
// RUN: FileCheck %s --check-prefix=REPORT < %t/report.json
// RUN: not stepc %s --train --remat=most -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not stepc %s --train --remat=max --remat-budget=1GiB -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not stepc %s --train --remat-budget=lots -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: not stepc %s --train --remat-budget=100 -o %t/bad.step 2>&1 | FileCheck %s --check-prefix=TOOSMALL
// RUN: not ls %t/bad.step

// The report's remat section. The backward step-autodiff builds reads
// three [4, 8] f32 values (384 B): h (for the gradient of b), bb (for
// those of h and b) and t = tanh(h * bb) (tanh's VJP). h is a matmul
// result, kept; bb, y = h * bb and t are recomputed from h and the param b
// by three elementwise/view ops, which leaves 128 B saved.
// REPORT:      "remat": {
// REPORT:        "mode": "auto",
// REPORT:        "recomputed_ops": 3,
// REPORT:        "saved_bytes_after": 128,
// REPORT-NEXT:   "saved_bytes_before": 384,

// MODE: stepc: --remat: unknown mode 'most', expected none, auto or max
// BOTH: stepc: --remat=max and --remat-budget exclude each other: a budget is its own mode
// BYTES: stepc: --remat-budget: bytes=lots is not a number
// TOOSMALL: error: step-remat: no plan fits the budget of 100 bytes: the smallest planned peak found is {{[0-9]+}} bytes (without recomputation: {{[0-9]+}} bytes)

func.func @forward(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<8x8xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<8xf32> {step.kind = "param", step.name = "b"})
    -> tensor<f32> {
  %h = step.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = step.mul %h, %bb : tensor<4x8xf32>
  %t = step.tanh %y : tensor<4x8xf32>
  %loss = step.reduce_sum %t dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
