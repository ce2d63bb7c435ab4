// RUN: step-opt %s -split-input-file --step-autodiff | FileCheck %s

// The VJP rules of shape ops, reductions and matmul
// (dialects/step/VJPShape.cpp): the inverse data movement each builds, the
// forward values it reads, and that nothing is built for an input operand.

// transpose: the inverse permutation.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: step.transpose %{{.+}}, perm = [1, 2, 0]
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[G:.+]] = step.transpose %[[SEED]], perm = [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<2x3x4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %t = step.transpose %x, perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %l = step.reduce_sum %t dims = [0, 1, 2] : tensor<3x4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// broadcast_in_dim: a sum over the new dim.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<2x3xf32>
// CHECK: %[[G:.+]] = step.reduce_sum %[[SEED]] dims = [0] : tensor<2x3xf32> -> tensor<3xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %b = step.broadcast_in_dim %x, dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %l = step.reduce_sum %b dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A unit-stride slice: one pad with zeros around the window.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[G:.+]] = step.pad %[[SEED]] low = [1, 2] high = [1, 0] value = 0.000000e+00 : tensor<4x6xf32> -> tensor<6x8xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<6x8xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %s = step.slice %x start = [1, 2] limit = [5, 8] strides = [1, 1] : tensor<6x8xf32> -> tensor<4x6xf32>
  %l = step.reduce_sum %s dims = [0, 1] : tensor<4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A strided slice: each element gets stride - 1 zeros after it (a unit dim
// padded and folded back), the tail past the operand is cut, and the block
// is padded to its start.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[R:.+]] = step.reshape %[[SEED]] : tensor<5x3xf32> -> tensor<5x3x1xf32>
// CHECK: %[[P:.+]] = step.pad %[[R]] low = [0, 0, 0] high = [0, 0, 2] value = 0.000000e+00 : tensor<5x3x1xf32> -> tensor<5x3x3xf32>
// CHECK: %[[F:.+]] = step.reshape %[[P]] : tensor<5x3x3xf32> -> tensor<5x9xf32>
// CHECK: %[[C:.+]] = step.slice %[[F]] start = [0, 0] limit = [5, 8] strides = [1, 1] : tensor<5x9xf32> -> tensor<5x8xf32>
// CHECK: %[[G:.+]] = step.pad %[[C]] low = [1, 0] high = [0, 0] value = 0.000000e+00 : tensor<5x8xf32> -> tensor<6x8xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<6x8xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %s = step.slice %x start = [1, 0] limit = [6, 8] strides = [1, 3] : tensor<6x8xf32> -> tensor<5x3xf32>
  %l = step.reduce_sum %s dims = [0, 1] : tensor<5x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// concat: one slice per param input; the input in the middle gets none.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[GA:.+]] = step.slice %[[SEED]] start = [0, 0] limit = [2, 3] strides = [1, 1]
// CHECK-NOT: start = [2, 0]
// CHECK: %[[GC:.+]] = step.slice %[[SEED]] start = [6, 0] limit = [7, 3] strides = [1, 1]
// CHECK-NEXT: return %{{.+}}, %[[GA]], %[[GC]]
func.func @forward(%a: tensor<2x3xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4x3xf32> {step.kind = "input", step.name = "b"},
                   %c: tensor<1x3xf32> {step.kind = "param", step.name = "c"}) -> tensor<f32> {
  %s = step.concat %a, %b, %c dim = 0 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<1x3xf32> -> tensor<7x3xf32>
  %l = step.reduce_sum %s dims = [0, 1] : tensor<7x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// pad: the window of the operand (the pad value gets no gradient).
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[G:.+]] = step.slice %[[SEED]] start = [0, 1] limit = [2, 4] strides = [1, 1] : tensor<4x4xf32> -> tensor<2x3xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<2x3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %p = step.pad %x low = [0, 1] high = [2, 0] value = 1.0 : tensor<2x3xf32> -> tensor<4x4xf32>
  %l = step.reduce_sum %p dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_mean: divide once at the reduced shape, then broadcast; reshape:
// back to the operand's shape.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-DAG: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[N:.+]] = step.constant dense<6.000000e+00> : tensor<f32>
// CHECK: %[[Q:.+]] = step.div %[[ONE]], %[[N]] : tensor<f32>
// CHECK: %[[B:.+]] = step.broadcast_in_dim %[[Q]], dims = [] : tensor<f32> -> tensor<6xf32>
// CHECK: %[[G:.+]] = step.reshape %[[B]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<2x3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %r = step.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %m = step.reduce_mean %r dims = [0] : tensor<6xf32> -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// reduce_max (keepdim): the saved maximum marks the ties, the gradient is
// divided by their count and spread over them.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<2x3xf32> {step.kind = "param", step.name = "x"}
// CHECK: %[[M:.+]] = step.reduce_max %[[X]] dims = [1] keepdim
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim %{{.+}}, dims = [] : tensor<f32> -> tensor<2x1xf32>
// CHECK: %[[MB:.+]] = step.broadcast_in_dim %[[M]], dims = [0, 1] : tensor<2x1xf32> -> tensor<2x3xf32>
// CHECK: %[[EQ:.+]] = step.compare eq, %[[X]], %[[MB]]
// CHECK: %[[MASK:.+]] = step.cast %[[EQ]] : tensor<2x3xi1> -> tensor<2x3xf32>
// CHECK: %[[COUNT:.+]] = step.reduce_sum %[[MASK]] dims = [1] keepdim
// CHECK: %[[SHARE:.+]] = step.div %[[SEED]], %[[COUNT]] : tensor<2x1xf32>
// CHECK: %[[SB:.+]] = step.broadcast_in_dim %[[SHARE]], dims = [0, 1] : tensor<2x1xf32> -> tensor<2x3xf32>
// CHECK: %[[G:.+]] = step.mul %[[SB]], %[[MASK]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<2x3xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %m = step.reduce_max %x dims = [1] keepdim : tensor<2x3xf32> -> tensor<2x1xf32>
  %l = step.reduce_sum %m dims = [0, 1] : tensor<2x1xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_max in bf16: the count and the division in f32, one rounding back
// to bf16 at the end.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: tensor<2x3xbf16> {step.kind = "grad", step.name = "grad.x"}
// CHECK: %[[GB:.+]] = step.cast %{{.+}} : tensor<2xf32> -> tensor<2xbf16>
// CHECK: %[[MASK:.+]] = step.cast %{{.+}} : tensor<2x3xi1> -> tensor<2x3xf32>
// CHECK: %[[COUNT:.+]] = step.reduce_sum %[[MASK]] dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
// CHECK: %[[GF:.+]] = step.cast %[[GB]] : tensor<2xbf16> -> tensor<2xf32>
// CHECK: %[[SHARE:.+]] = step.div %[[GF]], %[[COUNT]] : tensor<2xf32>
// CHECK: %[[SPREAD:.+]] = step.mul %{{.+}}, %[[MASK]] : tensor<2x3xf32>
// CHECK: %[[G:.+]] = step.cast %[[SPREAD]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<2x3xbf16> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %m = step.reduce_max %x dims = [1] : tensor<2x3xbf16> -> tensor<2xbf16>
  %c = step.cast %m : tensor<2xbf16> -> tensor<2xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A linear layer x @ w^T with x an input: the weight's gradient G^T @ x is
// one matmul; x's gradient is not built.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x16xf32> {step.kind = "input", step.name = "x"}
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK-NEXT: %[[G:.+]] = step.matmul %[[SEED]], %[[X]] transpose_a : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<8x16xf32> {step.kind = "input", step.name = "x"},
                   %w: tensor<4x16xf32> {step.kind = "param", step.name = "w"}) -> tensor<f32> {
  %y = step.matmul %x, %w transpose_b : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x4xf32>
  %l = step.reduce_sum %y dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A rank-2 weight shared by a batch: its gradient sums over the batch as one
// matmul of the flattened lhs and G.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x8x16xf32> {step.kind = "param", step.name = "x"}
// CHECK-SAME: %[[W:[^:]+]]: tensor<16x4xf32> {step.kind = "param", step.name = "w"}
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[GX:.+]] = step.matmul %[[SEED]], %[[W]] transpose_b : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
// CHECK: %[[XF:.+]] = step.reshape %[[X]] : tensor<2x8x16xf32> -> tensor<16x16xf32>
// CHECK: %[[GF:.+]] = step.reshape %[[SEED]] : tensor<2x8x4xf32> -> tensor<16x4xf32>
// CHECK: %[[GW:.+]] = step.matmul %[[XF]], %[[GF]] transpose_a : tensor<16x16xf32>, tensor<16x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: return %{{.+}}, %[[GX]], %[[GW]]
func.func @forward(%x: tensor<2x8x16xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<16x4xf32> {step.kind = "param", step.name = "w"}) -> tensor<f32> {
  %y = step.matmul %x, %w : tensor<2x8x16xf32>, tensor<16x4xf32> -> tensor<2x8x4xf32>
  %l = step.reduce_sum %y dims = [0, 1, 2] : tensor<2x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Batched with transpose_a: the flags absorb the transposes (no
// step.transpose is built).
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[A:[^:]+]]: tensor<2x16x8xf32> {step.kind = "param", step.name = "x"}
// CHECK-SAME: %[[B:[^:]+]]: tensor<2x16x4xf32> {step.kind = "param", step.name = "w"}
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK-NOT: step.transpose
// CHECK: %[[GA:.+]] = step.matmul %[[B]], %[[SEED]] transpose_b : tensor<2x16x4xf32>, tensor<2x8x4xf32> -> tensor<2x16x8xf32>
// CHECK: %[[GB:.+]] = step.matmul %[[A]], %[[SEED]] : tensor<2x16x8xf32>, tensor<2x8x4xf32> -> tensor<2x16x4xf32>
// CHECK-NEXT: return %{{.+}}, %[[GA]], %[[GB]]
func.func @forward(%x: tensor<2x16x8xf32> {step.kind = "param", step.name = "x"},
                   %w: tensor<2x16x4xf32> {step.kind = "param", step.name = "w"}) -> tensor<f32> {
  %y = step.matmul %x, %w transpose_a : tensor<2x16x8xf32>, tensor<2x16x4xf32> -> tensor<2x8x4xf32>
  %l = step.reduce_sum %y dims = [0, 1, 2] : tensor<2x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
