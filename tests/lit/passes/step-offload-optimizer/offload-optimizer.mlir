// RUN: step-opt %s -split-input-file --step-offload-optimizer | FileCheck %s
// RUN: step-opt %s -split-input-file --step-offload-optimizer --step-memory-plan | FileCheck %s --check-prefix=PLAN

// AdamW on one param. Params and state move to host memory (arguments and
// results); the param comes back to the device at the start of the step
// for the forward; the gradient (here the input x) goes out just before
// the update; the counter and the update run on the host and their
// results are returned from host memory as they are.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4xf32> {step.kind = "param", step.memory = "host", step.name = "w"}
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<i64> {step.kind = "state", step.memory = "host", step.name = "opt.step"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<4xf32> {step.kind = "state", step.memory = "host", step.name = "opt.exp_avg.w"}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<4xf32> {step.kind = "state", step.memory = "host", step.name = "opt.exp_avg_sq.w"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {step.kind = "input", step.name = "x"})
// CHECK-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "param", step.memory = "host", step.name = "w"}, tensor<i64> {step.kind = "state", step.memory = "host", step.name = "opt.step"}
// CHECK-SAME: step.offload_optimizer = {host_ops = 2 : i64, offloaded_bytes = 16 : i64, offloads = 1 : i64, params_bytes = 16 : i64, reloaded_bytes = 16 : i64, reloads = 1 : i64, state_bytes = 40 : i64, updates = 1 : i64}
// CHECK-NEXT: %[[WD:.+]] = step.reload %[[W]] : tensor<4xf32>
// CHECK:      %[[Y:.+]] = step.mul %[[WD]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[L:.+]] = step.reduce_sum %[[Y]]
// CHECK-NEXT: %[[T1:.+]] = step.add %[[T]], %{{.+}} {step.host} : tensor<i64>
// CHECK-NEXT: %[[G:.+]] = step.offload %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[P:.+]], %[[M1:.+]], %[[V1:.+]] = step.adamw_update %[[W]], %[[G]], %[[M]], %[[V]], %[[T1]], %{{.+}} {step.host}
// CHECK-NEXT: return %[[L]], %[[P]], %[[T1]], %[[M1]], %[[V1]]

// The memory plan puts the host ops' results in the host arena (offsets
// there) and the reloaded param in the device arena.
// PLAN-LABEL: func.func @train_step(
// PLAN-SAME: step.arena_bytes = {{[1-9][0-9]*}} : i64
// PLAN-SAME: step.host_bytes = {{[1-9][0-9]*}} : i64
// PLAN: step.reload %arg0 {step.offsets = array<i64: 0>}
func.func @train_step(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}, %t: tensor<i64> {step.kind = "state", step.name = "opt.step"}, %m: tensor<4xf32> {step.kind = "state", step.name = "opt.exp_avg.w"}, %v: tensor<4xf32> {step.kind = "state", step.name = "opt.exp_avg_sq.w"}, %x: tensor<4xf32> {step.kind = "input", step.name = "x"}) -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "param", step.name = "w"}, tensor<i64> {step.kind = "state", step.name = "opt.step"}, tensor<4xf32> {step.kind = "state", step.name = "opt.exp_avg.w"}, tensor<4xf32> {step.kind = "state", step.name = "opt.exp_avg_sq.w"}) {
  %lr = step.constant dense<1.000000e-03> : tensor<f32>
  %one = step.constant dense<1> : tensor<i64>
  %y = step.mul %w, %x : tensor<4xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  %t1 = step.add %t, %one : tensor<i64>
  %p, %m1, %v1 = step.adamw_update %w, %x, %m, %v, %t1, %lr : tensor<4xf32>, tensor<i64>, tensor<f32>
  return %l, %p, %t1, %m1, %v1 : tensor<f32>, tensor<4xf32>, tensor<i64>, tensor<4xf32>, tensor<4xf32>
}

// -----

// ZeRO-2 on 2 ranks: the collectives and the rank's local_shard stay on
// the device. The param's shard is cut on the device from the reloaded
// param and copied out with the gradient's shard; the new shard comes back
// for the all_gather, whose result goes out again to the param's host
// result slot. The loss's all_reduce stays a device result.
// CHECK-LABEL: func.func @train_step(
// CHECK-NEXT: %[[WD:.+]] = step.reload %arg0 : tensor<4xf32>
// CHECK:      %[[L:.+]] = step.all_reduce
// CHECK-NOT:  step.host
// CHECK-NEXT: %[[GS:.+]] = step.reduce_scatter %arg2
// CHECK-NOT:  step.host
// CHECK-NEXT: %[[T1:.+]] = step.add %arg1, %{{.+}} {step.host}
// CHECK-NEXT: %[[WS:.+]] = step.local_shard %[[WD]]
// CHECK-NOT:  step.host
// CHECK-NEXT: %[[WH:.+]] = step.offload %[[WS]] : tensor<2xf32>
// CHECK-NEXT: %[[GH:.+]] = step.offload %[[GS]] : tensor<2xf32>
// CHECK-NEXT: %[[P:.+]] = step.sgd_update %[[WH]], %[[GH]], %[[T1]], %{{.+}} {step.host}
// CHECK-NEXT: %[[PD:.+]] = step.reload %[[P]] : tensor<2xf32>
// CHECK-NEXT: %[[PF:.+]] = step.all_gather %[[PD]]
// CHECK-NOT:  step.host
// CHECK-NEXT: %[[PH:.+]] = step.offload %[[PF]] : tensor<4xf32>
// CHECK-NEXT: return %[[L]], %[[PH]], %[[T1]]
func.func @train_step(%arg0: tensor<4xf32> {step.kind = "param", step.name = "w"}, %arg1: tensor<i64> {step.kind = "state", step.name = "opt.step"}, %arg2: tensor<4xf32> {step.kind = "input", step.name = "x"}) -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "param", step.name = "w"}, tensor<i64> {step.kind = "state", step.name = "opt.step"}) {
  %0 = step.constant dense<1.000000e-01> : tensor<f32>
  %1 = step.constant dense<1> : tensor<i64>
  %2 = step.mul %arg0, %arg2 : tensor<4xf32>
  %3 = step.reduce_sum %2 dims = [0] : tensor<4xf32> -> tensor<f32>
  %4 = step.all_reduce %3 {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 1>} : tensor<f32> -> tensor<f32>
  %5 = step.reduce_scatter %arg2 {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 1>} : tensor<4xf32> -> tensor<2xf32>
  %6 = step.add %arg1, %1 : tensor<i64>
  %7 = step.local_shard %arg0 {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<4xf32> -> tensor<2xf32>
  %new_param = step.sgd_update %7, %5, %6, %0 : (tensor<2xf32>, tensor<2xf32>, tensor<i64>, tensor<f32>) -> tensor<2xf32>
  %8 = step.all_gather %new_param {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<2xf32> -> tensor<4xf32>
  return %4, %8, %6 : tensor<f32>, tensor<4xf32>, tensor<i64>
}

// -----

// A dynamic loss scale (state) read by the forward and broadcast to a
// gradient's shape: those ops stay on the device with the scalar scale
// reloaded (after the param: reloads come in order of first use), not a
// broadcast made on the host and copied. The skip of a non-finite update
// (a select between the new and the old param by the broadcast flag) runs
// on the host: only the one-byte flag goes out, no param comes back.
// CHECK-LABEL: func.func @train_step(
// CHECK-NEXT: %[[WD:.+]] = step.reload %arg0 : tensor<4xf32>
// CHECK-NEXT: %[[S:.+]] = step.reload %arg2 : tensor<f32>
// CHECK:      step.mul %{{.+}}, %[[S]] : tensor<f32>
// CHECK-NEXT: %[[SB:.+]] = step.broadcast_in_dim %[[S]], dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %[[G:.+]] = step.mul %[[SB]], %arg3 : tensor<4xf32>
// CHECK-NEXT: %[[OK:.+]] = step.check_finite %[[G]]
// CHECK-NEXT: %[[T1:.+]] = step.add %arg1, %{{.+}} {step.host}
// CHECK-NEXT: %[[GH:.+]] = step.offload %[[G]]
// CHECK-NEXT: %[[P:.+]] = step.sgd_update %arg0, %[[GH]], %[[T1]], %{{.+}} {step.host}
// CHECK-NEXT: %[[OKH:.+]] = step.offload %[[OK]] : tensor<i1>
// CHECK-NEXT: %[[OKB:.+]] = step.broadcast_in_dim %[[OKH]], dims = [] {step.host}
// CHECK-NEXT: %[[SEL:.+]] = step.select %[[OKB]], %[[P]], %arg0 {step.host}
// CHECK-NEXT: return %{{.+}}, %[[SEL]], %[[T1]], %arg2
func.func @train_step(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}, %t: tensor<i64> {step.kind = "state", step.name = "opt.step"}, %s: tensor<f32> {step.kind = "state", step.name = "amp.loss_scale"}, %x: tensor<4xf32> {step.kind = "input", step.name = "x"}) -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "param", step.name = "w"}, tensor<i64> {step.kind = "state", step.name = "opt.step"}, tensor<f32> {step.kind = "state", step.name = "amp.loss_scale"}) {
  %lr = step.constant dense<1.000000e-01> : tensor<f32>
  %one = step.constant dense<1> : tensor<i64>
  %y = step.mul %w, %x : tensor<4xf32>
  %l = step.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  %ls = step.mul %l, %s : tensor<f32>
  %sb = step.broadcast_in_dim %s, dims = [] : tensor<f32> -> tensor<4xf32>
  %g = step.mul %sb, %x : tensor<4xf32>
  %ok = step.check_finite %g : tensor<4xf32>
  %t1 = step.add %t, %one : tensor<i64>
  %p = step.sgd_update %w, %g, %t1, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>) -> tensor<4xf32>
  %okb = step.broadcast_in_dim %ok, dims = [] : tensor<i1> -> tensor<4xi1>
  %sel = step.select %okb, %p, %w : tensor<4xi1>, tensor<4xf32>
  return %ls, %sel, %t1, %s : tensor<f32>, tensor<4xf32>, tensor<i64>, tensor<f32>
}
