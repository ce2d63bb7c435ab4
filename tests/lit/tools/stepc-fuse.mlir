// stepc runs step-fuse last: the written step holds fusions, the report
// lists them (kind, ops, bytes) and the step's traffic over every launched
// op (fusions.kernels), and --no-fuse leaves one op per kernel.

// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=adamw --clip=1.0 --emit=mlir -o %t/fused.mlir --report=%t/report.json
// RUN: FileCheck %s --check-prefix=FUSED < %t/fused.mlir
// RUN: FileCheck %s --check-prefix=REPORT < %t/report.json
// RUN: stepc %s --train --optimizer=adamw --clip=1.0 --emit=mlir --no-fuse -o %t/plain.mlir --report=%t/plain.json
// RUN: FileCheck %s --check-prefix=PLAIN < %t/plain.mlir
// RUN: FileCheck %s --check-prefix=PLAINREPORT < %t/plain.json

// FUSED: func.func @train_step(
// FUSED: step.fusion "matmul"
// FUSED: step.fusion "multi_tensor"
// FUSED: step.reduce_sum
// FUSED: step.fusion "multi_tensor"
// FUSED-COUNT-2: step.adamw_update

// REPORT: "fuse": true
// REPORT: "fusions": {
// REPORT: "bytes_read":
// REPORT: "count":
// REPORT: "groups": [
// REPORT: "kind": "matmul",
// REPORT-NEXT: "ops": [
// REPORT-NEXT: "matmul",
// REPORT-NEXT: "broadcast_in_dim",
// REPORT-NEXT: "add",
// REPORT-NEXT: "relu"
// REPORT: "kind": "multi_tensor"
// REPORT: "kernels": {
// REPORT-NEXT: "bytes_read": {{[1-9][0-9]*}},
// REPORT-NEXT: "bytes_written": {{[1-9][0-9]*}},
// REPORT-NEXT: "count": {{[1-9][0-9]*}}
// REPORT: "pass": "step-fuse"

// PLAIN-NOT: step.fusion
// PLAIN-COUNT-2: step.adamw_update
// PLAINREPORT: "fuse": false
// PLAINREPORT: "fusions": {
// PLAINREPORT: "count": 0
// PLAINREPORT: "kernels": {
// PLAINREPORT-NEXT: "bytes_read": {{[1-9][0-9]*}},
// PLAINREPORT-NEXT: "bytes_written": {{[1-9][0-9]*}},
// PLAINREPORT-NEXT: "count": {{[1-9][0-9]*}}
// PLAINREPORT-NOT: "pass": "step-fuse"
func.func @forward(%w: tensor<3x4xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<4xf32> {step.kind = "param", step.name = "b"},
                   %x: tensor<8x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<8x3xf32>, tensor<3x4xf32> -> tensor<8x4xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  %s = step.add %m, %bb : tensor<8x4xf32>
  %r = step.relu %s : tensor<8x4xf32>
  %q = step.mul %r, %r : tensor<8x4xf32>
  %l = step.reduce_mean %q dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
