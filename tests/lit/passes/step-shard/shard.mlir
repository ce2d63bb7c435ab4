// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=dp world-size=2 overlap=false" | FileCheck %s --check-prefix=DP
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero1 world-size=2 overlap=false" | FileCheck %s --check-prefix=Z1
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero2 world-size=4 overlap=false" | FileCheck %s --check-prefix=Z2
// RUN: step-opt %s --step-autodiff --step-optimizer --step-shard="mode=zero3 world-size=4 overlap=false" | FileCheck %s --check-prefix=Z3
// RUN: step-opt %s --step-autodiff --step-optimizer="clip=1.0" --step-shard="mode=zero2 world-size=2 overlap=false" | FileCheck %s --check-prefix=CLIP

// dp: the loss and both gradients are averaged right after the backward;
// params and state keep their shapes.
// DP-LABEL: func.func @train_step(
// DP-SAME: %arg3: tensor<3x2xf32> {step.kind = "state", step.name = "opt.exp_avg.w"}
// DP-SAME: attributes {step.shard = {grads_bytes = 32 : i64, grads_bytes_full = 32 : i64, mode = "dp", params_bytes = 32 : i64, params_bytes_full = 32 : i64, state_bytes = 72 : i64, state_bytes_full = 72 : i64, world_size = 2 : i64}}
// DP: %[[FB:.+]]:3 = call @forward_backward
// DP-NEXT: %[[LOSS:.+]] = step.all_reduce %[[FB]]#0 {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 1>} : tensor<f32> -> tensor<f32>
// DP-NEXT: %[[GW:.+]] = step.all_reduce %[[FB]]#1 {{.*}}reduce = "mean"{{.*}} : tensor<3x2xf32> -> tensor<3x2xf32>
// DP-NEXT: %[[GB:.+]] = step.all_reduce %[[FB]]#2 {{.*}}reduce = "mean"{{.*}} : tensor<2xf32> -> tensor<2xf32>
// DP: step.adamw_update %arg0, %[[GW]], %arg3, %arg5, {{.*}} : tensor<3x2xf32>
// DP-NOT: step.local_shard
// DP: return %[[LOSS]]

// zero1: state blocks of ceil(6/2) = 3 and ceil(2/2) = 1 elements; the
// update reads the replica's block of param and averaged gradient and the
// new param is gathered back.
// Z1-LABEL: func.func @train_step(
// Z1-SAME: %arg3: tensor<3xf32> {step.full_shape = array<i64: 3, 2>, step.kind = "state", step.name = "opt.exp_avg.w"}
// Z1-SAME: %arg4: tensor<1xf32> {step.full_shape = array<i64: 2>, step.kind = "state", step.name = "opt.exp_avg.b"}
// Z1: %[[GW:.+]] = step.all_reduce %{{.+}}#1 {{.*}} : tensor<3x2xf32> -> tensor<3x2xf32>
// Z1: %[[PB:.+]] = step.local_shard %arg0 {{.*}} : tensor<3x2xf32> -> tensor<3xf32>
// Z1-NEXT: %[[GB:.+]] = step.local_shard %[[GW]] {{.*}} : tensor<3x2xf32> -> tensor<3xf32>
// Z1-NEXT: %[[NEW:.+]], %{{.+}}, %{{.+}} = step.adamw_update %[[PB]], %[[GB]], %arg3, %arg5, {{.*}} : tensor<3xf32>
// Z1: %[[ALL:.+]] = step.all_gather %[[NEW]] {{.*}} : tensor<3xf32> -> tensor<6xf32>
// Z1-NEXT: %[[W:.+]] = step.reshape %[[ALL]] : tensor<6xf32> -> tensor<3x2xf32>
// Z1: return %{{.+}}, %[[W]], {{.*}} : tensor<f32>, tensor<3x2xf32>, tensor<2xf32>, tensor<i64>, tensor<3xf32>, tensor<1xf32>, tensor<3xf32>, tensor<1xf32>

// zero2 on 4: gradients flattened, padded to 4 * ceil(n / 4) and
// reduce-scattered; the bias (2 elements) pads to 4, blocks of 1.
// Z2-LABEL: func.func @train_step(
// Z2-SAME: grads_bytes = 12 : i64, grads_bytes_full = 32 : i64, mode = "zero2"
// Z2: %[[FW:.+]] = step.reshape %{{.+}}#1 : tensor<3x2xf32> -> tensor<6xf32>
// Z2-NEXT: %[[PW:.+]] = step.pad %[[FW]] low = [0] high = [2] {{.*}} : tensor<6xf32> -> tensor<8xf32>
// Z2-NEXT: %[[GW:.+]] = step.reduce_scatter %[[PW]] {group_size = 4 : i64, reduce = "mean", replica_groups = array<i64: 0, 1, 2, 3>} : tensor<8xf32> -> tensor<2xf32>
// Z2: %[[PB:.+]] = step.pad %{{.+}}#2 low = [0] high = [2] {{.*}} : tensor<2xf32> -> tensor<4xf32>
// Z2-NEXT: step.reduce_scatter %[[PB]] {{.*}} : tensor<4xf32> -> tensor<1xf32>
// Z2: step.adamw_update %{{.+}}, %[[GW]], %arg3, %arg5, {{.*}} : tensor<2xf32>
// Z2: step.all_gather %{{.+}} : tensor<2xf32> -> tensor<8xf32>
// Z2-NEXT: step.slice %{{.+}} start = [0] limit = [6] strides = [1] : tensor<8xf32> -> tensor<6xf32>

// zero3: params are blocks too, gathered before the call; the update
// writes the block, which is the result.
// Z3-LABEL: func.func @train_step(
// Z3-SAME: %arg0: tensor<2xf32> {step.full_shape = array<i64: 3, 2>, step.kind = "param", step.name = "w"}
// Z3-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<2xf32> {step.full_shape = array<i64: 3, 2>, step.kind = "param", step.name = "w"}
// Z3-SAME: params_bytes = 12 : i64
// Z3: %[[A:.+]] = step.all_gather %arg0 {{.*}} : tensor<2xf32> -> tensor<8xf32>
// Z3-NEXT: %[[S:.+]] = step.slice %[[A]] start = [0] limit = [6] {{.*}} -> tensor<6xf32>
// Z3-NEXT: %[[W:.+]] = step.reshape %[[S]] : tensor<6xf32> -> tensor<3x2xf32>
// Z3: call @forward_backward(%[[W]], %{{.+}}, %arg7)
// Z3: %[[NEW:.+]], %{{.+}}, %{{.+}} = step.adamw_update %arg0, %{{.+}}, %arg3, %arg5,
// Z3-NOT: step.all_gather
// Z3: return %{{.+}}, %[[NEW]],

// Clipping on blocks: each gradient's sum of squares is a block sum plus an
// all_reduce (sum); the norm is then the same on every replica.
// CLIP-LABEL: func.func @train_step(
// CLIP: %[[SQ:.+]] = step.mul %[[G:.+]], %[[G]] : tensor<3xf32>
// CLIP-NEXT: %[[PART:.+]] = step.reduce_sum %[[SQ]] dims = [0] : tensor<3xf32> -> tensor<f32>
// CLIP-NEXT: step.all_reduce %[[PART]] {{.*}}reduce = "sum"{{.*}} : tensor<f32> -> tensor<f32>
// CLIP: step.sqrt
func.func @forward(%w: tensor<3x2xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<4x2xf32>
  %z = step.add %y, %bb : tensor<4x2xf32>
  %l = step.reduce_mean %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
