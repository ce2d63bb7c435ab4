// RUN: step-opt %s -split-input-file --step-autodiff | FileCheck %s

// softmax reuses its forward result y (saved for the backward):
// dx = y * (g - sum(g * y, dim)).
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4x10xf32> {step.kind = "param", step.name = "x"}
// CHECK-SAME: %[[W:.+]]: tensor<4x10xf32> {step.kind = "input", step.name = "w"}
// CHECK: %[[Y:.+]] = step.softmax %[[X]] dim = 1 : tensor<4x10xf32>
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<4x10xf32>
// CHECK: %[[G:.+]] = step.mul %[[SEED]], %[[W]]
// CHECK: %[[GY:.+]] = step.mul %[[G]], %[[Y]] : tensor<4x10xf32>
// CHECK: %[[S:.+]] = step.reduce_sum %[[GY]] dims = [1] : tensor<4x10xf32> -> tensor<4xf32>
// CHECK: %[[SB:.+]] = step.broadcast_in_dim %[[S]], dims = [0] : tensor<4xf32> -> tensor<4x10xf32>
// CHECK: %[[D:.+]] = step.sub %[[G]], %[[SB]]
// CHECK: %[[DX:.+]] = step.mul %[[Y]], %[[D]]
// CHECK-NOT: step.softmax
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<4x10xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<4x10xf32> {step.kind = "input", step.name = "w"})
    -> tensor<f32> {
  %y = step.softmax %x dim = 1 : tensor<4x10xf32>
  %p = step.mul %y, %w : tensor<4x10xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<4x10xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// log_softmax reuses y through exp(y): dx = g - exp(y) * sum(g, dim).
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[Y:.+]] = step.log_softmax %[[X:.+]] dim = 0 : tensor<5x3xf32>
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<5x3xf32>
// CHECK: %[[G:.+]] = step.mul %[[SEED]], %{{.+}} : tensor<5x3xf32>
// CHECK: %[[S:.+]] = step.reduce_sum %[[G]] dims = [0] : tensor<5x3xf32> -> tensor<3xf32>
// CHECK: %[[SB:.+]] = step.broadcast_in_dim %[[S]], dims = [1] : tensor<3xf32> -> tensor<5x3xf32>
// CHECK: %[[E:.+]] = step.exp %[[Y]]
// CHECK: %[[M:.+]] = step.mul %[[E]], %[[SB]]
// CHECK: %[[DX:.+]] = step.sub %[[G]], %[[M]]
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<5x3xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<5x3xf32> {step.kind = "input", step.name = "w"})
    -> tensor<f32> {
  %y = step.log_softmax %x dim = 0 : tensor<5x3xf32>
  %p = step.mul %y, %w : tensor<5x3xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<5x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// layer_norm over two trailing dims saves nothing: mean and rstd are
// recomputed from x with the op's eps (biased variance, two passes); dbias
// and dweight sum over the leading dim, dx uses the weight broadcast back.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x3x8xf32>
// CHECK-SAME: %[[WT:[^:]+]]: tensor<3x8xf32>
// CHECK: step.layer_norm %[[X]], %[[WT]]
// CHECK: %[[G:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<2x3x8xf32>
// CHECK: %[[DB:.+]] = step.reduce_sum %[[G]] dims = [0] : tensor<2x3x8xf32> -> tensor<3x8xf32>
// CHECK: %[[MEAN:.+]] = step.reduce_mean %[[X]] dims = [1, 2] : tensor<2x3x8xf32> -> tensor<2xf32>
// CHECK: %[[MB:.+]] = step.broadcast_in_dim %[[MEAN]], dims = [0]
// CHECK: %[[XC:.+]] = step.sub %[[X]], %[[MB]]
// CHECK: %[[SQ:.+]] = step.mul %[[XC]], %[[XC]]
// CHECK: %[[VAR:.+]] = step.reduce_mean %[[SQ]] dims = [1, 2]
// CHECK: %[[EPS:.+]] = step.constant dense<9.99999974E-6> : tensor<2xf32>
// CHECK: %[[VE:.+]] = step.add %[[VAR]], %[[EPS]]
// CHECK: %[[RSTD:.+]] = step.rsqrt %[[VE]]
// CHECK: %[[RB:.+]] = step.broadcast_in_dim %[[RSTD]], dims = [0]
// CHECK: %[[XHAT:.+]] = step.mul %[[XC]], %[[RB]]
// CHECK: %[[GX:.+]] = step.mul %[[G]], %[[XHAT]]
// CHECK: %[[DW:.+]] = step.reduce_sum %[[GX]] dims = [0] : tensor<2x3x8xf32> -> tensor<3x8xf32>
// CHECK: %[[WB:.+]] = step.broadcast_in_dim %[[WT]], dims = [1, 2] : tensor<3x8xf32> -> tensor<2x3x8xf32>
// CHECK: %[[GW:.+]] = step.mul %[[G]], %[[WB]]
// CHECK: step.reduce_mean %[[GW]] dims = [1, 2]
// CHECK: %[[DX:.+]] = step.mul %[[RB]], %{{.+}} : tensor<2x3x8xf32>
// CHECK-NOT: step.layer_norm
// CHECK: return %{{.+}}, %[[DX]], %[[DW]], %[[DB]]
func.func @forward(%x: tensor<2x3x8xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<3x8xf32> {step.kind = "param", step.name = "w"},
                   %b: tensor<3x8xf32> {step.kind = "param", step.name = "b"})
    -> tensor<f32> {
  %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>
  %l = step.reduce_sum %y dims = [0, 1, 2] : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Only the bias is a param: its gradient is a sum, and no statistics are
// recomputed.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[DB:.+]] = step.reduce_sum %{{.+}} dims = [0] : tensor<4x6xf32> -> tensor<6xf32>
// CHECK-NOT: step.reduce_mean
// CHECK-NOT: step.rsqrt
// CHECK: return %{{.+}}, %[[DB]]
func.func @forward(%x: tensor<4x6xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<6xf32> {step.kind = "input", step.name = "w"},
                   %b: tensor<6xf32> {step.kind = "param", step.name = "b"})
    -> tensor<f32> {
  %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>
  %l = step.reduce_sum %y dims = [0, 1] : tensor<4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// embedding: the table gradient is one scatter-add of the cotangent at the
// forward's indices; the indices get none.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[I:.+]]: tensor<2x3xi64> {step.kind = "input", step.name = "i"}
// CHECK: %[[G:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<2x3x4xf32>
// CHECK: %[[DW:.+]] = step.embedding_grad %[[I]], %[[G]] num_embeddings = 5 : tensor<2x3xi64>, tensor<2x3x4xf32> -> tensor<5x4xf32>
// CHECK: return %{{.+}}, %[[DW]]
func.func @forward(%i: tensor<2x3xi64> {step.kind = "input", step.name = "i"},
                   %w: tensor<5x4xf32> {step.kind = "param", step.name = "w"})
    -> tensor<f32> {
  %e = step.embedding %i, %w : tensor<2x3xi64>, tensor<5x4xf32> -> tensor<2x3x4xf32>
  %l = step.reduce_sum %e dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// cross_entropy: the fused gradient op on the forward's logits and targets,
// with the reduction and ignore_index carried over.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x5xf32>
// CHECK-SAME: %[[T:[^:]+]]: tensor<8xi64>
// CHECK: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DX:.+]] = step.cross_entropy_grad %[[X]], %[[T]], %[[ONE]] reduction = mean ignore_index = 3 : tensor<8x5xf32>, tensor<8xi64>, tensor<f32> -> tensor<8x5xf32>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<8x5xf32> {step.kind = "param", step.name = "x"},
                   %t: tensor<8xi64> {step.kind = "input", step.name = "t"})
    -> tensor<f32> {
  %l = step.cross_entropy %x, %t reduction = mean ignore_index = 3 : tensor<8x5xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduction = none: the cotangent is a vector.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[G:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<6xf32>
// CHECK: step.cross_entropy_grad %{{.+}}, %{{.+}}, %[[G]] reduction = none : tensor<6x3xf32>, tensor<6xi32>, tensor<6xf32> -> tensor<6x3xf32>
func.func @forward(%x: tensor<6x3xf32> {step.kind = "param", step.name = "x"},
                   %t: tensor<6xi32> {step.kind = "input", step.name = "t"})
    -> tensor<f32> {
  %c = step.cross_entropy %x, %t reduction = none : tensor<6x3xf32>, tensor<6xi32> -> tensor<6xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// dropout: the cotangent goes through a dropout with the same p and seed
// (the same mask and scale); nothing of the forward is saved.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: step.dropout %{{.+}} p = 3.000000e-01 seed = 42 : tensor<4x8xf32>
// CHECK: %[[G:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK: %[[DX:.+]] = step.dropout %[[G]] p = 3.000000e-01 seed = 42 : tensor<4x8xf32>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<4x8xf32> {step.kind = "param", step.name = "x"})
    -> tensor<f32> {
  %d = step.dropout %x p = 3.0e-01 seed = 42 : tensor<4x8xf32>
  %l = step.reduce_sum %d dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// With an offset (a step counter), the cotangent's dropout reads the same
// offset: the same mask.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32> {step.kind = "param", step.name = "x"}, %[[T:[^:]+]]: tensor<i64>
// CHECK: step.dropout %[[X]] offset %[[T]] p = 3.000000e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>
// CHECK: %[[G:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK: %[[DX:.+]] = step.dropout %[[G]] offset %[[T]] p = 3.000000e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<4x8xf32> {step.kind = "param", step.name = "x"},
                   %t: tensor<i64> {step.kind = "input", step.name = "t"})
    -> tensor<f32> {
  %d = step.dropout %x offset %t p = 3.0e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>
  %l = step.reduce_sum %d dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Causal attention: one step.attention_grad on the forward's operands and
// the result's gradient gives dQ, dK and dV; no [.., Tq, Tk] tensor (scores,
// probabilities, mask) is built.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x4x8xf32>
// CHECK-SAME: %[[K:[^:]+]]: tensor<2x6x8xf32>
// CHECK-SAME: %[[V:[^:]+]]: tensor<2x6x5xf32>
// CHECK: step.attention %[[Q]], %[[K]], %[[V]] causal
// CHECK: %[[DO:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<2x4x5xf32>
// CHECK-NOT: tensor<2x4x6x
// CHECK: %[[GQ:[^ ]+]], %[[GK:[^ ]+]], %[[GV:[^ ]+]] = step.attention_grad %[[Q]], %[[K]], %[[V]], %[[DO]] causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>, tensor<2x4x5xf32> -> tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>
// CHECK-NOT: step.matmul
// CHECK-NOT: step.softmax
// CHECK: return %{{.+}}, %[[GQ]], %[[GK]], %[[GV]] :
func.func @forward(%q: tensor<2x4x8xf32> {step.kind = "param", step.name = "q"},
                   %k: tensor<2x6x8xf32> {step.kind = "param", step.name = "k"},
                   %v: tensor<2x6x5xf32> {step.kind = "param", step.name = "v"})
    -> tensor<f32> {
  %o = step.attention %q, %k, %v causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  %l = step.reduce_sum %o dims = [0, 1, 2] : tensor<2x4x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Non-causal attention with an explicit scale and only v a param: the op
// keeps the scale and no causal flag, and only its dV result is returned.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %{{[^ ]+}}, %{{[^ ]+}}, %[[GV:[^ ]+]] = step.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} scale = 2.500000e-01 : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6x5xf32>, tensor<4x5xf32> -> tensor<4x8xf32>, tensor<6x8xf32>, tensor<6x5xf32>
// CHECK-NOT: step.matmul
// CHECK: return %{{.+}}, %[[GV]] :
func.func @forward(%q: tensor<4x8xf32> {step.kind = "input", step.name = "q"},
                   %k: tensor<6x8xf32> {step.kind = "input", step.name = "k"},
                   %v: tensor<6x5xf32> {step.kind = "param", step.name = "v"})
    -> tensor<f32> {
  %o = step.attention %q, %k, %v scale = 2.5e-01 : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
  %l = step.reduce_sum %o dims = [0, 1] : tensor<4x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// bf16 softmax: the rule computes in f32 (the forward's precision) and
// rounds the gradient once to bf16.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[Y:.+]] = step.softmax %{{.+}} dim = 0 : tensor<4x8xbf16>
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK: %[[G:.+]] = step.cast %[[SEED]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[YF:.+]] = step.cast %[[Y]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[GF:.+]] = step.cast %[[G]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: step.mul %[[GF]], %[[YF]] : tensor<4x8xf32>
// CHECK: %[[DXF:.+]] = step.mul %[[YF]], %{{.+}} : tensor<4x8xf32>
// CHECK: %[[DX:.+]] = step.cast %[[DXF]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<4x8xbf16> {step.kind = "param", step.name = "x"})
    -> tensor<f32> {
  %y = step.softmax %x dim = 0 : tensor<4x8xbf16>
  %c = step.cast %y : tensor<4x8xbf16> -> tensor<4x8xf32>
  %l = step.reduce_sum %c dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
