// RUN: step-opt %s -split-input-file --step-amp --canonicalize | FileCheck %s
// RUN: step-opt %s -split-input-file --step-amp="keep-f32=gelu" --canonicalize | FileCheck %s --check-prefix=KEEP

// A linear + ReLU + linear + cross-entropy (the MLP): the matmuls and the
// bias adds run in bf16, each param is cast once (the f32 master weight is
// untouched: the signature keeps f32), the loss runs in f32 on logits cast
// up once, and that one cast also gives the declared f32 logits result.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32> {step.kind = "input"
// CHECK-SAME: %[[W1:[^:]+]]: tensor<8x16xf32> {step.kind = "param"
// CHECK-SAME: %[[B1:[^:]+]]: tensor<16xf32> {step.kind = "param"
// CHECK-SAME: %[[W2:[^:]+]]: tensor<16x3xf32> {step.kind = "param"
// CHECK-SAME: -> (tensor<f32> {step.name = "loss"}, tensor<4x3xf32> {step.name = "logits"})
// CHECK-SAME: step.amp = {dtype = "bf16", loss_scale = "none"}
// CHECK-DAG: %[[W2H:.+]] = step.cast %[[W2]] : tensor<16x3xf32> -> tensor<16x3xbf16>
// CHECK-DAG: %[[B1H:.+]] = step.cast %[[B1]] : tensor<16xf32> -> tensor<16xbf16>
// CHECK-DAG: %[[W1H:.+]] = step.cast %[[W1]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-DAG: %[[XH:.+]] = step.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[M1:.+]] = step.matmul %[[XH]], %[[W1H]] : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK: %[[BB:.+]] = step.broadcast_in_dim %[[B1H]], dims = [1] : tensor<16xbf16> -> tensor<4x16xbf16>
// CHECK: %[[A:.+]] = step.add %[[M1]], %[[BB]] : tensor<4x16xbf16>
// CHECK: %[[R:.+]] = step.relu %[[A]] : tensor<4x16xbf16>
// CHECK: %[[M2:.+]] = step.matmul %[[R]], %[[W2H]] : tensor<4x16xbf16>, tensor<16x3xbf16> -> tensor<4x3xbf16>
// CHECK: %[[L:.+]] = step.cast %[[M2]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK: %[[LOSS:.+]] = step.cross_entropy %[[L]], %{{.+}} reduction = mean : tensor<4x3xf32>
// CHECK: return %[[LOSS]], %[[L]]
// CHECK-NOT: step.cast
func.func @forward(%x: tensor<4x8xf32> {step.kind = "input", step.name = "x"},
                   %w1: tensor<8x16xf32> {step.kind = "param", step.name = "w1"},
                   %b1: tensor<16xf32> {step.kind = "param", step.name = "b1"},
                   %w2: tensor<16x3xf32> {step.kind = "param", step.name = "w2"},
                   %y: tensor<4xi64> {step.kind = "input", step.name = "y"})
    -> (tensor<f32> {step.name = "loss"}, tensor<4x3xf32> {step.name = "logits"}) {
  %m1 = step.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = step.broadcast_in_dim %b1, dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %a = step.add %m1, %bb : tensor<4x16xf32>
  %r = step.relu %a : tensor<4x16xf32>
  %m2 = step.matmul %r, %w2 : tensor<4x16xf32>, tensor<16x3xf32> -> tensor<4x3xf32>
  %l = step.cross_entropy %m2, %y reduction = mean : tensor<4x3xf32>, tensor<4xi64> -> tensor<f32>
  return %l, %m2 : tensor<f32>, tensor<4x3xf32>
}

// -----

// f32 class: softmax, reductions, exp and log take a bf16 activation cast
// up; a residual add of an f32 stream and a bf16 branch promotes to f32
// (torch type promotion); GELU follows its bf16 input (or, with
// keep-f32=gelu, runs in f32); an op marked step.amp = "f32" (the tracing
// API's autocast-off scope) runs in f32.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[M:.+]] = step.matmul {{.+}} -> tensor<4x4xbf16>
// CHECK: %[[MF:.+]] = step.cast %[[M]] : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK: step.softmax %[[MF]] dim = 1 : tensor<4x4xf32>
// CHECK: step.exp %[[MF]] : tensor<4x4xf32>
// CHECK: step.add %arg0, %[[MF]] : tensor<4x4xf32>
// CHECK: step.gelu %[[M]] approximate tanh : tensor<4x4xbf16>
// CHECK: step.tanh %[[MF]] {step.amp = "f32"} : tensor<4x4xf32>
// CHECK: step.reduce_sum %{{.+}} dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
// KEEP-LABEL: func.func @forward(
// KEEP: step.gelu %{{.+}} approximate tanh : tensor<4x4xf32>
func.func @forward(%x: tensor<4x4xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<4x4xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %m = step.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = step.softmax %m dim = 1 : tensor<4x4xf32>
  %e = step.exp %m : tensor<4x4xf32>
  %r = step.add %x, %m : tensor<4x4xf32>
  %g = step.gelu %m approximate tanh : tensor<4x4xf32>
  %t = step.tanh %m {step.amp = "f32"} : tensor<4x4xf32>
  %a = step.add %s, %e : tensor<4x4xf32>
  %b = step.add %a, %r : tensor<4x4xf32>
  %c = step.add %b, %g : tensor<4x4xf32>
  %d = step.add %c, %t : tensor<4x4xf32>
  %l = step.reduce_sum %d dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A constant is weak, like a Python scalar in PyTorch: scaling a bf16
// activation by an f32 constant stays in bf16 (the constant is cast), it
// does not promote the activation to f32.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[M:.+]] = step.matmul {{.+}} -> tensor<2x2xbf16>
// CHECK: step.mul %[[M]], %{{.+}} : tensor<2x2xbf16>
func.func @forward(%x: tensor<2x2xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<2x2xf32> {step.kind = "param", step.name = "w"})
    -> (tensor<f32> {step.name = "loss"}) {
  %c = step.constant dense<0.125> : tensor<2x2xf32>
  %m = step.matmul %x, %w : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = step.mul %m, %c : tensor<2x2xf32>
  %l = step.reduce_mean %s dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
