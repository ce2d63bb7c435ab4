// stepc: the train step it writes, its report, and bad input (a message,
// exit code 1, and no output file).

// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=adamw,lr=3e-4,wd=0.1 --clip=1.0 --schedule=cosine,warmup=2,total=10 --emit=mlir -o %t/step.mlir --report=%t/report.json
// RUN: FileCheck %s --check-prefix=STEP < %t/step.mlir
// RUN: FileCheck %s --check-prefix=REPORT < %t/report.json
// RUN: stepc %s --train --shard=dp --world-size=2 --no-kernels -o %t/dp.step --report=%t/dp.json
// RUN: FileCheck %s --check-prefix=SHARD-REPORT < %t/dp.json
// RUN: stepc %s --train --optimizer=sgd,momentum=0.9 --grad-accum=2 -o %t/accum.mlir
// RUN: FileCheck %s --check-prefix=ACCUM < %t/accum.mlir
// RUN: stepc %s -o %t/model.mlir
// RUN: FileCheck %s --check-prefix=MODEL < %t/model.mlir
// RUN: not stepc %s --train --optimizer=adam -o %t/bad1.mlir 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not stepc %s --train --schedule=cosine,warmup=5 -o %t/bad2.mlir 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: not stepc %s --train --emit=cubin -o %t/bad3.step 2>&1 | FileCheck %s --check-prefix=EMIT
// RUN: stepc %s --train -o %t/m.step --report=%t/plan.json
// RUN: FileCheck %s --check-prefix=PLAN < %t/plan.json
// RUN: head -c 7 %t/m.step | FileCheck %s --check-prefix=MAGIC
// RUN: printf 'func.func @forward(%%%%w: tensor<2xf32> {step.kind = "param", step.name = "w"}) -> tensor<2xf32> {\n  return %%%%w : tensor<2xf32>\n}\n' > %t/noloss.mlir
// RUN: not stepc %t/noloss.mlir --train -o %t/bad4.mlir 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not ls %t/bad1.mlir %t/bad2.mlir %t/bad3.step %t/bad4.mlir

// STEP: func.func @train_step(
// STEP-SAME: {step.kind = "param", step.name = "w"}
// STEP-SAME: {step.kind = "state", step.name = "opt.step"}
// STEP-SAME: {step.kind = "state", step.name = "opt.exp_avg.w"}
// STEP-SAME: {step.kind = "state", step.name = "opt.exp_avg_sq.w"}
// STEP-SAME: {step.kind = "input", step.name = "x"}
// STEP: step.adamw_update {{.*}} {weight_decay = 1.000000e-01 : f64}
// STEP-NOT: func.func

// REPORT: "grad_accum": 1
// REPORT: "gradients": 1
// REPORT: "pass": "step-autodiff",
// REPORT-NEXT: "seconds": {{[0-9]+(\.[0-9]+)?(e-[0-9]+)?$}}
// step-shard's record holds its own counts: the inliner it runs inside is
// part of it, not a record of its own that took them.
// SHARD-REPORT: "all_reduce": 2,
// SHARD-REPORT-NEXT: "world_size": 2
// SHARD-REPORT-NEXT: },
// SHARD-REPORT-NEXT: "ops_after": {{[1-9][0-9]*}},
// SHARD-REPORT-NEXT: "ops_before": {{[1-9][0-9]*}},
// SHARD-REPORT-NEXT: "pass": "step-shard",
// SHARD-REPORT-NEXT: "seconds":
// SHARD-REPORT: "ops_before": {{[0-9]+}},
// SHARD-REPORT-NEXT: "pass": "inline",
// SHARD-REPORT-NOT: "pass": "inline",
// REPORT: "param_updates": 1,
// REPORT-NEXT: "state_tensors": 3
// REPORT: "pass": "step-optimizer"

// ACCUM: func.func @train_step(
// ACCUM-SAME: tensor<8x3xf32> {step.kind = "input", step.name = "x"}
// ACCUM-COUNT-2: step.slice
// ACCUM: step.sgd_update {{.*}} momentum_buffer

// MODEL: func.func @forward(
// MODEL-NOT: @train_step

// OPT: stepc: --optimizer: unknown optimizer 'adam', expected sgd, adamw or lamb
// SCHED: stepc: --schedule: cosine needs total (0) > warmup (5)
// EMIT: stepc: --emit=cubin is not a kind of output; expected artifact or mlir
// PLAN: "arena_bytes":
// PLAN-NEXT: "arena_bytes_no_reuse":
// PLAN: "pass": "step-memory-plan"
// MAGIC: STEPJIT
// LOSS: noloss.mlir:1:1: error: step-autodiff: @forward must return a scalar f32 loss (tensor<f32>) as its first result, found 'tensor<2xf32>'
func.func @forward(%w: tensor<3xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %wb = step.broadcast_in_dim %w, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %p = step.mul %wb, %x : tensor<4x3xf32>
  %s = step.mul %p, %p : tensor<4x3xf32>
  %l = step.reduce_mean %s dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
