// RUN: step-opt %s -split-input-file --step-autodiff --step-optimizer | FileCheck %s --check-prefix=ADAMW
// RUN: step-opt %s -split-input-file --step-autodiff --step-optimizer="optimizer=sgd momentum=0.9 nesterov=true lr=0.5" | FileCheck %s --check-prefix=SGD
// RUN: step-opt %s -split-input-file --step-autodiff --step-optimizer="optimizer=sgd lr=0.5" | FileCheck %s --check-prefix=PLAIN
// RUN: step-opt %s -split-input-file --step-autodiff --step-optimizer="optimizer=lamb clip=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: step-opt %s -split-input-file --step-autodiff --step-optimizer="schedule=cosine warmup=10 total=100 lr=0.1" | FileCheck %s --check-prefix=COS

// AdamW: params, then the step counter and two moments per param, then
// inputs; one fused update per param, fed the counter + 1 and the lr.
// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: %[[W:[a-z0-9]+]]: tensor<4xf32> {step.kind = "param", step.name = "w"}
// ADAMW-SAME: %[[B:[a-z0-9]+]]: tensor<2xf32> {step.kind = "param", step.name = "b"}
// ADAMW-SAME: %[[T:[a-z0-9]+]]: tensor<i64> {step.kind = "state", step.name = "opt.step"}
// ADAMW-SAME: %[[MW:[a-z0-9]+]]: tensor<4xf32> {step.kind = "state", step.name = "opt.exp_avg.w"}
// ADAMW-SAME: %[[MB:[a-z0-9]+]]: tensor<2xf32> {step.kind = "state", step.name = "opt.exp_avg.b"}
// ADAMW-SAME: %[[VW:[a-z0-9]+]]: tensor<4xf32> {step.kind = "state", step.name = "opt.exp_avg_sq.w"}
// ADAMW-SAME: %[[VB:[a-z0-9]+]]: tensor<2xf32> {step.kind = "state", step.name = "opt.exp_avg_sq.b"}
// ADAMW-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {step.kind = "input", step.name = "x"}
// ADAMW-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "param", step.name = "w"}, tensor<2xf32> {step.kind = "param", step.name = "b"}, tensor<i64> {step.kind = "state", step.name = "opt.step"}
// ADAMW: %[[J:.+]]:3 = call @forward_backward(%[[W]], %[[X]], %[[B]])
// ADAMW: %[[T1:.+]] = step.add %[[T]], %{{.+}} : tensor<i64>
// ADAMW: %[[LR:.+]] = step.mul
// ADAMW-NOT: step.sqrt
// ADAMW: %[[PW:.+]], %[[MW1:.+]], %[[VW1:.+]] = step.adamw_update %[[W]], %[[J]]#1, %[[MW]], %[[VW]], %[[T1]], %[[LR]] : tensor<4xf32>
// ADAMW: %[[PB:.+]], %[[MB1:.+]], %[[VB1:.+]] = step.adamw_update %[[B]], %[[J]]#2, %[[MB]], %[[VB]], %[[T1]], %[[LR]] : tensor<2xf32>
// ADAMW: return %[[J]]#0, %[[PW]], %[[PB]], %[[T1]], %[[MW1]], %[[MB1]], %[[VW1]], %[[VB1]]

// SGD with momentum: one buffer per param, hyper-parameters as attributes.
// SGD-LABEL: func.func @train_step(
// SGD-SAME: {step.kind = "state", step.name = "opt.momentum_buffer.w"}
// SGD-SAME: {step.kind = "state", step.name = "opt.momentum_buffer.b"}
// SGD: step.sgd_update {{.+}} momentum_buffer {{.+}} {momentum = 9.000000e-01 : f64, nesterov}
// SGD: step.sgd_update {{.+}} momentum_buffer

// Plain SGD keeps no state but the counter.
// PLAIN-LABEL: func.func @train_step(
// PLAIN-SAME: {step.kind = "state", step.name = "opt.step"}, %{{.+}}: tensor<4xf32> {step.kind = "input"
// PLAIN-NOT: momentum_buffer
// PLAIN: step.sgd_update
// PLAIN-NOT: momentum_buffer

// Clipping: one sum of squares per gradient, one sqrt, every gradient
// scaled by the same clamped coefficient before its update.
// CLIP-LABEL: func.func @train_step(
// CLIP: %[[J:.+]]:3 = call @forward_backward
// CLIP: step.mul %[[J]]#1, %[[J]]#1
// CLIP: step.reduce_sum
// CLIP: step.mul %[[J]]#2, %[[J]]#2
// CLIP: step.reduce_sum
// CLIP: %[[N:.+]] = step.sqrt
// CLIP: %[[C:.+]] = step.min
// CLIP: %[[CW:.+]] = step.broadcast_in_dim %[[C]], dims = [] : tensor<f32> -> tensor<4xf32>
// CLIP: %[[GW:.+]] = step.mul %[[J]]#1, %[[CW]]
// CLIP: %[[CB:.+]] = step.broadcast_in_dim %[[C]], dims = [] : tensor<f32> -> tensor<2xf32>
// CLIP: %[[GB:.+]] = step.mul %[[J]]#2, %[[CB]]
// CLIP: step.lamb_update %{{.+}}, %[[GW]]
// CLIP: step.lamb_update %{{.+}}, %[[GB]]

// Cosine with warmup: the schedule is computed from the counter (cos and a
// select between the warmup ramp and the decay), not baked in.
// COS-LABEL: func.func @train_step(
// COS: %[[T1:.+]] = step.add %{{.+}}, %{{.+}} : tensor<i64>
// COS: %[[TF:.+]] = step.cast %[[T1]] : tensor<i64> -> tensor<f32>
// COS: step.cos
// COS: %[[WARM:.+]] = step.compare lt
// COS: %[[F:.+]] = step.select %[[WARM]]
// COS: %[[LR:.+]] = step.mul %{{.+}}, %[[F]]
// COS: step.adamw_update {{.+}}, %[[T1]], %[[LR]]
func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4xf32> {step.kind = "input", step.name = "x"},
                   %b: tensor<2xf32> {step.kind = "param", step.name = "b"})
    -> (tensor<f32> {step.name = "loss"}) {
  %y = step.mul %w, %x : tensor<4xf32>
  %l1 = step.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  %bb = step.mul %b, %b : tensor<2xf32>
  %l2 = step.reduce_sum %bb dims = [0] : tensor<2xf32> -> tensor<f32>
  %l = step.add %l1, %l2 : tensor<f32>
  return %l : tensor<f32>
}
