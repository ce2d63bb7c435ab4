// RUN: split-file %s %t
// RUN: step-opt %t/mlp.mlir --step-tensor-parallel="size=2 world-size=2" | FileCheck %s --check-prefix=MLP
// RUN: step-opt %t/attn.mlir --step-tensor-parallel="size=2 world-size=4" | FileCheck %s --check-prefix=ATTN
// RUN: step-opt %t/mlp.mlir --step-tensor-parallel="size=2 world-size=4" --step-autodiff --step-optimizer="optimizer=sgd momentum=0.9 clip=1.0" --step-shard="mode=dp world-size=4 tp=2 overlap=false" | FileCheck %s --check-prefix=STEP
// RUN: not step-opt %t/dropout.mlir --step-tensor-parallel="size=2 world-size=2" 2>&1 | FileCheck %s --check-prefix=DROPOUT
// RUN: not step-opt %t/mlp.mlir --step-tensor-parallel="size=3 world-size=4" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not step-opt %t/mlp.mlir --step-autodiff --step-optimizer --step-shard="mode=dp world-size=2 tp=2" 2>&1 | FileCheck %s --check-prefix=ORDER

// A pair: w1 (and its bias) by columns, relu on the rank's columns, w2 by
// rows, the partial product summed over the group before its bias.
// MLP: module attributes {step.tp = {size = 2 : i64, split = {b1 = array<i64: 0, 1, 8>, w1 = array<i64: 1, 1, 4, 8>, w2 = array<i64: 0, 1, 8, 4>}, world_size = 2 : i64}}
// MLP-LABEL: func.func @forward(
// MLP-SAME: %arg1: tensor<4x4xf32> {step.kind = "param", step.name = "w1", step.tp_split = array<i64: 1, 1>}
// MLP-SAME: %arg2: tensor<4xf32> {step.kind = "param", step.name = "b1", step.tp_split = array<i64: 0, 1>}
// MLP-SAME: %arg3: tensor<4x4xf32> {step.kind = "param", step.name = "w2", step.tp_split = array<i64: 0, 1>}
// MLP-SAME: %arg4: tensor<4xf32> {step.kind = "param", step.name = "b2"}
// MLP: %[[H:.+]] = step.matmul %arg0, %arg1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
// MLP: %[[B:.+]] = step.broadcast_in_dim %arg2, dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
// MLP: %[[R:.+]] = step.relu %{{.+}} : tensor<2x4xf32>
// MLP: %[[P:.+]] = step.matmul %[[R]], %arg3 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
// MLP-NEXT: %[[S:.+]] = step.all_reduce %[[P]] {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>}
// MLP: step.add %[[S]], %{{.+}} : tensor<2x4xf32>
// MLP-NOT: step.all_reduce

// Fused q/k/v: the root is split in 3 groups, each slice keeps its group
// (bounds divided by the group size), heads split through reshape and
// transpose, attention on the rank's head. World 4: two groups of 2.
// ATTN: split = {wo = array<i64: 0, 1, 4, 4>, wqkv = array<i64: 1, 3, 4, 12>}
// ATTN: step.matmul %arg0, %arg1 : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
// ATTN: step.slice %{{.+}} start = [0, 0, 0] limit = [2, 3, 2] {{.*}} -> tensor<2x3x2xf32>
// ATTN: step.slice %{{.+}} start = [0, 0, 2] limit = [2, 3, 4] {{.*}} -> tensor<2x3x2xf32>
// ATTN: step.slice %{{.+}} start = [0, 0, 4] limit = [2, 3, 6] {{.*}} -> tensor<2x3x2xf32>
// ATTN: step.attention {{.*}} : tensor<2x1x3x2xf32>, tensor<2x1x3x2xf32>, tensor<2x1x3x2xf32> -> tensor<2x1x3x2xf32>
// ATTN: step.reshape %{{.+}} : tensor<2x3x1x2xf32> -> tensor<2x3x2xf32>
// ATTN: step.matmul %{{.+}}, %arg2 : tensor<2x3x2xf32>, tensor<2x4xf32> -> tensor<2x3x4xf32>
// ATTN-NEXT: step.all_reduce %{{.+}} {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1, 2, 3>}

// The step on 4 ranks (2 groups of 2): the replicated b2's gradient is
// averaged over the world, the split w1's over its data-parallel group
// ({0, 2} and {1, 3}) and halved; clipping adds the group's partial norms;
// split params' slots are split alike.
// STEP-LABEL: func.func @train_step(
// STEP-SAME: step.name = "opt.momentum_buffer.w1", step.tp_split = array<i64: 1, 1, 4, 8>
// Per rank: half of w1, b1, w2 (and of their slots); b2 and opt.step whole.
// STEP-SAME: step.shard = {grads_bytes = 160 : i64, grads_bytes_full = 304 : i64, mode = "tp", params_bytes = 160 : i64, params_bytes_full = 304 : i64, state_bytes = 168 : i64, state_bytes_full = 312 : i64, tp = 2 : i64, world_size = 4 : i64}
// STEP-DAG: step.all_reduce %{{.+}} {group_size = 4 : i64, reduce = "mean", replica_groups = array<i64: 0, 1, 2, 3>} : tensor<4xf32>
// STEP-DAG: %[[DP:.+]] = step.all_reduce %{{.+}} {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 2, 1, 3>} : tensor<4x4xf32>
// STEP-DAG: %[[HALF:.+]] = step.constant dense<5.000000e-01> : tensor<4x4xf32>
// STEP-DAG: step.mul %[[DP]], %[[HALF]] : tensor<4x4xf32>
// STEP-DAG: step.all_reduce %{{.+}} {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1, 2, 3>} : tensor<f32>

// Dropout between the matmuls: its mask depends on the element's place,
// so no split (and no other pair): an error listing the candidate.
// DROPOUT: error: step-tensor-parallel: found no matmul pair to split over 2 ranks
// DROPOUT: w1: 'step.dropout' at {{.*}}: dropout's mask depends on the element's position

// SIZE: error: step-tensor-parallel: size = 3 must be >= 1 and divide world-size = 4

// ORDER: error: step-shard: tp = 2 needs the forward split by step-tensor-parallel{size=2} first

//--- mlp.mlir
func.func @forward(%x: tensor<2x4xf32> {step.kind = "input", step.name = "x"},
                   %w1: tensor<4x8xf32> {step.kind = "param", step.name = "w1"},
                   %b1: tensor<8xf32> {step.kind = "param", step.name = "b1"},
                   %w2: tensor<8x4xf32> {step.kind = "param", step.name = "w2"},
                   %b2: tensor<4xf32> {step.kind = "param", step.name = "b2"})
    -> (tensor<f32> {step.name = "loss"}) {
  %h = step.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %bb = step.broadcast_in_dim %b1, dims = [1] : tensor<8xf32> -> tensor<2x8xf32>
  %hb = step.add %h, %bb : tensor<2x8xf32>
  %r = step.relu %hb : tensor<2x8xf32>
  %y = step.matmul %r, %w2 : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %cb = step.broadcast_in_dim %b2, dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %z = step.add %y, %cb : tensor<2x4xf32>
  %sq = step.mul %z, %z : tensor<2x4xf32>
  %l = step.reduce_mean %sq dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- attn.mlir
func.func @forward(%x: tensor<2x3x4xf32> {step.kind = "input", step.name = "x"},
                   %wqkv: tensor<4x12xf32> {step.kind = "param", step.name = "wqkv"},
                   %wo: tensor<4x4xf32> {step.kind = "param", step.name = "wo"})
    -> (tensor<f32> {step.name = "loss"}) {
  %qkv = step.matmul %x, %wqkv : tensor<2x3x4xf32>, tensor<4x12xf32> -> tensor<2x3x12xf32>
  %q0 = step.slice %qkv start = [0, 0, 0] limit = [2, 3, 4] strides = [1, 1, 1] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %k0 = step.slice %qkv start = [0, 0, 4] limit = [2, 3, 8] strides = [1, 1, 1] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %v0 = step.slice %qkv start = [0, 0, 8] limit = [2, 3, 12] strides = [1, 1, 1] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %q1 = step.reshape %q0 : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %k1 = step.reshape %k0 : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %v1 = step.reshape %v0 : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %q = step.transpose %q1, perm = [0, 2, 1, 3] : tensor<2x3x2x2xf32> -> tensor<2x2x3x2xf32>
  %k = step.transpose %k1, perm = [0, 2, 1, 3] : tensor<2x3x2x2xf32> -> tensor<2x2x3x2xf32>
  %v = step.transpose %v1, perm = [0, 2, 1, 3] : tensor<2x3x2x2xf32> -> tensor<2x2x3x2xf32>
  %a = step.attention %q, %k, %v causal : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  %at = step.transpose %a, perm = [0, 2, 1, 3] : tensor<2x2x3x2xf32> -> tensor<2x3x2x2xf32>
  %m = step.reshape %at : tensor<2x3x2x2xf32> -> tensor<2x3x4xf32>
  %o = step.matmul %m, %wo : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %l = step.reduce_mean %o dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- dropout.mlir
func.func @forward(%x: tensor<2x4xf32> {step.kind = "input", step.name = "x"},
                   %w1: tensor<4x8xf32> {step.kind = "param", step.name = "w1"},
                   %w2: tensor<8x4xf32> {step.kind = "param", step.name = "w2"})
    -> (tensor<f32> {step.name = "loss"}) {
  %h = step.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %d = step.dropout %h p = 0.5 seed = 1 : tensor<2x8xf32>
  %y = step.matmul %d, %w2 : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %l = step.reduce_mean %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
