// stepc --dot writes the compiled function as a Graphviz graph (MLIR's
// op-graph printer): each step.fusion is a cluster holding its ops, data
// flows along edges, and no attribute is printed (a constant's would print
// its data). --no-fuse draws no cluster of a fusion. With --buckets it is
// refused and nothing is written.

// RUN: rm -rf %t && mkdir -p %t
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --no-kernels -o %t/step.step --dot=%t/step.dot
// RUN: FileCheck %s --check-prefix=FUSED < %t/step.dot
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --no-fuse --emit=mlir -o %t/plain.mlir --dot=%t/plain.dot
// RUN: FileCheck %s --check-prefix=PLAIN < %t/plain.dot
// RUN: not stepc %s --train --buckets=T:4 --no-kernels -o %t/bad.step --dot=%t/bad.dot 2>&1 | FileCheck %s --check-prefix=BUCKETS
// RUN: not ls %t/bad.dot %t/bad.step

// FUSED: digraph G {
// FUSED: label = "func.func : ()";
// The matmul fusion of the forward: a cluster with the matmul, the bias
// broadcast and add, and the relu inside.
// FUSED: subgraph cluster_{{[0-9]+}} {
// FUSED: label = "step.fusion : (tensor<8x4xf32>)";
// FUSED: label = "step.matmul : (tensor<8x4xf32>)"
// FUSED: label = "step.add : (tensor<8x4xf32>)"
// FUSED: label = "step.relu : (tensor<8x4xf32>)"
// FUSED: label = "step.yield : ()"
// FUSED: label = "step.sgd_update
// FUSED: -> v{{[0-9]+}}
// FUSED-NOT: dense<

// PLAIN: digraph G {
// PLAIN-NOT: step.fusion
// PLAIN: label = "step.matmul : (tensor<8x4xf32>)"
// PLAIN: label = "step.relu : (tensor<8x4xf32>)"

// BUCKETS: stepc: error: --dot draws one plan; it does not combine with --buckets
func.func @forward(%w: tensor<3x4xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<4xf32> {step.kind = "param", step.name = "b"},
                   %x: tensor<8x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %h = step.matmul %x, %w : tensor<8x3xf32>, tensor<3x4xf32> -> tensor<8x4xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  %z = step.add %h, %bb : tensor<8x4xf32>
  %r = step.relu %z : tensor<8x4xf32>
  %m = step.reduce_mean %r dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %m : tensor<f32>
}
