// RUN: step-opt %s -split-input-file --step-fuse-bias-grad | FileCheck %s

// GPT-2's q/k/v bias: the sum of the [B, T, 3C] gradient over B and T,
// beside the weight gradient's matmul reading the same gradient as
// [B*T, 3C] rows. The sum joins the matmul and reads its rhs over dim 0
// (the same elements in the same order): cuBLASLt's BGRADA.
// CHECK-LABEL: func.func @qkv_bias
// CHECK-NEXT: %[[G2:.+]] = step.reshape %arg1 : tensor<8x64x96xbf16> -> tensor<512x96xbf16>
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "matmul"(%arg0, %[[G2]]) : (tensor<512x32xbf16>, tensor<512x96xbf16>) -> (tensor<32x96xbf16>, tensor<96xbf16>)
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<512x32xbf16>, %[[G:.+]]: tensor<512x96xbf16>):
// CHECK-NEXT: %[[M:.+]] = step.matmul %[[X]], %[[G]] transpose_a
// CHECK-NEXT: %[[S:.+]] = step.reduce_sum %[[G]] dims = [0] : tensor<512x96xbf16> -> tensor<96xbf16>
// CHECK-NEXT: step.yield %[[M]], %[[S]]
// CHECK-NOT: step.reduce_sum
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @qkv_bias(%x: tensor<512x32xbf16>, %g: tensor<8x64x96xbf16>) -> (tensor<32x96xbf16>, tensor<96xbf16>) {
  %s = step.reduce_sum %g dims = [0, 1] : tensor<8x64x96xbf16> -> tensor<96xbf16>
  %g2 = step.reshape %g : tensor<8x64x96xbf16> -> tensor<512x96xbf16>
  %dw = step.matmul %x, %g2 transpose_a : tensor<512x32xbf16>, tensor<512x96xbf16> -> tensor<32x96xbf16>
  return %dw, %s : tensor<32x96xbf16>, tensor<96xbf16>
}

// -----

// The sum of the rhs itself, after the matmul: it moves up into the fusion.
// CHECK-LABEL: func.func @rhs_after
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "matmul"(%arg0, %arg1)
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<16x4xf32>, %[[G:.+]]: tensor<16x8xf32>):
// CHECK-NEXT: step.matmul %[[X]], %[[G]] transpose_a
// CHECK-NEXT: step.reduce_sum %[[G]] dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
// CHECK: %[[N:.+]] = step.neg %[[F]]#1
// CHECK: return %[[F]]#0, %[[N]]
func.func @rhs_after(%x: tensor<16x4xf32>, %g: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dw = step.matmul %x, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %s = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %n = step.neg %s : tensor<8xf32>
  return %dw, %n : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A transposed rhs [n, k] summed over its columns (dim 1) stays apart:
// cuBLASLt's BGRADA takes an untransposed A (our rhs) only.
// CHECK-LABEL: func.func @rhs_transposed
// CHECK-NEXT: step.reduce_sum %arg1 dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
// CHECK-NEXT: step.matmul %arg0, %arg1 transpose_b
// CHECK-NOT: step.fusion
// CHECK: return
func.func @rhs_transposed(%x: tensor<4x16xf32>, %g: tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_b : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  return %dw, %s : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Weights stored [out, in] (torch.nn.Linear): dW = dy^T x sums the lhs over
// its rows, a vector of the result's rows (cuBLASLt's BGRADB).
// CHECK-LABEL: func.func @lhs_bias
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "matmul"(%arg0, %arg1)
// CHECK-NEXT: ^bb0(%[[DY:.+]]: tensor<16x8xf32>, %[[X:.+]]: tensor<16x4xf32>):
// CHECK-NEXT: step.matmul %[[DY]], %[[X]] transpose_a
// CHECK-NEXT: step.reduce_sum %[[DY]] dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @lhs_bias(%dy: tensor<16x8xf32>, %x: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %dy dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %dw = step.matmul %dy, %x transpose_a : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  return %dw, %s : tensor<8x4xf32>, tensor<8xf32>
}

// -----

// Shapes NVIDIA's tests find no kernels for stay apart: a contraction of
// one (K = 1, either form), BGRADB of a one-row product. BGRADA of a
// one-row product is an ordinary call and joins.
// CHECK-LABEL: func.func @k_one
// CHECK-NOT: step.fusion
// CHECK: return
func.func @k_one(%x: tensor<1x4xf32>, %g: tensor<1x8xf32>, %dy: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8x4xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [0] : tensor<1x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<1x4xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %t = step.reduce_sum %dy dims = [0] : tensor<1x8xf32> -> tensor<8xf32>
  %dv = step.matmul %dy, %x transpose_a : tensor<1x8xf32>, tensor<1x4xf32> -> tensor<8x4xf32>
  return %dw, %s, %dv, %t : tensor<4x8xf32>, tensor<8xf32>, tensor<8x4xf32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @lhs_one_row
// CHECK-NOT: step.fusion
// CHECK: return
func.func @lhs_one_row(%dy: tensor<16x1xf32>, %x: tensor<16x4xf32>) -> (tensor<1x4xf32>, tensor<1xf32>) {
  %s = step.reduce_sum %dy dims = [0] : tensor<16x1xf32> -> tensor<1xf32>
  %dw = step.matmul %dy, %x transpose_a : tensor<16x1xf32>, tensor<16x4xf32> -> tensor<1x4xf32>
  return %dw, %s : tensor<1x4xf32>, tensor<1xf32>
}
// CHECK-LABEL: func.func @rhs_one_row
// CHECK-NEXT: step.fusion "matmul"(%arg0, %arg1)
// CHECK: step.reduce_sum %{{.+}} dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
func.func @rhs_one_row(%x: tensor<16x1xf32>, %g: tensor<16x8xf32>) -> (tensor<1x8xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<16x1xf32>, tensor<16x8xf32> -> tensor<1x8xf32>
  return %dw, %s : tensor<1x8xf32>, tensor<8xf32>
}

// -----

// Both operands have a sum: the rhs's joins (one bias pointer a call), the
// lhs's stays a reduction of its own.
// CHECK-LABEL: func.func @one_per_matmul
// CHECK-NEXT: %[[L:.+]] = step.reduce_sum %arg0 dims = [0] : tensor<16x4xf32> -> tensor<4xf32>
// CHECK-NEXT: step.fusion "matmul"(%arg0, %arg1)
// CHECK: step.reduce_sum %{{.+}} dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
func.func @one_per_matmul(%x: tensor<16x4xf32>, %g: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) {
  %l = step.reduce_sum %x dims = [0] : tensor<16x4xf32> -> tensor<4xf32>
  %r = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %dw, %l, %r : tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

// The sum read before the matmul (AMP's cast for the optimizer): the
// matmul moves up to the sum, with the reshape of its rhs.
// CHECK-LABEL: func.func @hoisted
// CHECK-NEXT: %[[G2:.+]] = step.reshape %arg1
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "matmul"(%arg0, %[[G2]])
// CHECK: step.reduce_sum %{{.+}} dims = [0] : tensor<32x8xbf16> -> tensor<8xbf16>
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[C:.+]] = step.cast %[[F]]#1 : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT: %[[E:.+]] = step.exp %arg2
// CHECK-NEXT: return %[[F]]#0, %[[C]], %[[E]]
func.func @hoisted(%x: tensor<32x4xbf16>, %g: tensor<2x16x8xbf16>, %y: tensor<4xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<4xf32>) {
  %s = step.reduce_sum %g dims = [0, 1] : tensor<2x16x8xbf16> -> tensor<8xbf16>
  %c = step.cast %s : tensor<8xbf16> -> tensor<8xf32>
  %e = step.exp %y : tensor<4xf32>
  %g2 = step.reshape %g : tensor<2x16x8xbf16> -> tensor<32x8xbf16>
  %dw = step.matmul %x, %g2 transpose_a : tensor<32x4xbf16>, tensor<32x8xbf16> -> tensor<4x8xbf16>
  return %dw, %c, %e : tensor<4x8xbf16>, tensor<8xf32>, tensor<4xf32>
}

// -----

// A gradient a matmul makes (as attention's kernels make GPT-2's q/k/v
// gradient) qualifies like an argument.
// CHECK-LABEL: func.func @made_by_matmul
// CHECK-NEXT: %[[G:.+]] = step.matmul %arg1, %arg2
// CHECK-NEXT: step.fusion "matmul"(%arg0, %[[G]])
func.func @made_by_matmul(%x: tensor<16x4xf32>, %a: tensor<16x2xf32>, %b: tensor<2x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %g = step.matmul %a, %b : tensor<16x2xf32>, tensor<2x8xf32> -> tensor<16x8xf32>
  %s = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %dw, %s : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// The lhs [m, k] untransposed summed over dim 1 (a vector of m) stays
// apart: cuBLASLt's BGRADB takes a transposed B (our lhs) only.
// CHECK-LABEL: func.func @lhs_untransposed
// CHECK-NEXT: step.reduce_sum %arg0 dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
// CHECK-NEXT: step.matmul %arg0, %arg1 :
// CHECK-NOT: step.fusion
// CHECK: return
func.func @lhs_untransposed(%dy: tensor<8x16xf32>, %x: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %dy dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  %dw = step.matmul %dy, %x : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  return %dw, %s : tensor<8x4xf32>, tensor<8xf32>
}

// -----

// More refusals, each in its own function: an lhs made from the sum
// itself (hoisting the matmul to the sum cannot put the reshape before
// it); one operand read twice (which side's sum?); the other dim of a
// square rhs (a vector of the right length, the wrong sums); a reshape
// that does not merge leading dims (X [16, 8] read as [8, 16]); a product
// with a bias add of its own (step-fuse folds that into the call); an
// unread product.
// CHECK-LABEL: func.func @refused_cycle
// CHECK-NOT: step.fusion
// CHECK: return
func.func @refused_cycle(%g: tensor<8x8xf32>) -> (tensor<1x8xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [0] : tensor<8x8xf32> -> tensor<8xf32>
  %n = step.neg %s : tensor<8xf32>
  %l = step.reshape %s : tensor<8xf32> -> tensor<1x8xf32>
  %dw = step.matmul %l, %g : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
  return %dw, %n : tensor<1x8xf32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @refused_same_operand
// CHECK-NOT: step.fusion
// CHECK: return
func.func @refused_same_operand(%g: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [1] : tensor<8x8xf32> -> tensor<8xf32>
  %dw = step.matmul %g, %g : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %dw, %s : tensor<8x8xf32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @refused_other_dim
// CHECK-NOT: step.fusion
// CHECK: return
func.func @refused_other_dim(%x: tensor<8x4xf32>, %g: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [1] : tensor<8x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<8x4xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %dw, %s : tensor<4x8xf32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @refused_reshape
// CHECK-NOT: step.fusion
// CHECK: return
func.func @refused_reshape(%x: tensor<8x4xf32>, %g: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %g2 = step.reshape %g : tensor<16x8xf32> -> tensor<8x16xf32>
  %dw = step.matmul %x, %g2 transpose_a : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %dw, %s : tensor<4x16xf32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @refused_product_epilogue
// CHECK-NOT: step.fusion
// CHECK: return
func.func @refused_product_epilogue(%x: tensor<16x4xf32>, %g: tensor<16x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %s = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %bb = step.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = step.add %dw, %bb : tensor<4x8xf32>
  return %y, %s : tensor<4x8xf32>, tensor<8xf32>
}
// CHECK-LABEL: func.func @refused_unread
// CHECK-NOT: step.fusion
// CHECK: return
func.func @refused_unread(%x: tensor<16x4xf32>, %g: tensor<16x8xf32>) -> tensor<8xf32> {
  %s = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %dw = step.matmul %x, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %s : tensor<8xf32>
}

// -----

// Refused, each for its reason: the sum of a gradient an elementwise op
// makes (step-fuse-loop-reductions sums it in that op's kernel); the sum
// read before the matmul while the matmul's lhs is made after the sum (by
// more than a view); a sum over the other dim (not the contraction: a
// vector of k); keepdim (not a vector); a sum already in a fusion (the
// operand's reader is the fusion, not a bare sum); a batched matmul (3-d
// operands); a sum of the operand's f32 cast (another tensor than the one
// the matmul reads).
// CHECK-LABEL: func.func @refused
// CHECK-NOT: step.fusion "matmul"
// CHECK: return
func.func @refused(%x: tensor<16x4xf32>, %g: tensor<16x8xf32>, %bx: tensor<2x16x4xf32>, %bg: tensor<2x16x8xf32>, %h: tensor<16x8xbf16>, %hx: tensor<16x4xbf16>) -> (tensor<8xf32>, tensor<4x8xf32>, tensor<16xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %e = step.neg %g : tensor<16x8xf32>
  %se = step.reduce_sum %e dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %me = step.matmul %x, %e transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %s0 = step.reduce_sum %g dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %n0 = step.neg %s0 : tensor<8xf32>
  %x0 = step.exp %x : tensor<16x4xf32>
  %m0 = step.matmul %x0, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %s1 = step.reduce_sum %g dims = [1] : tensor<16x8xf32> -> tensor<16xf32>
  %m1 = step.matmul %x0, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %s2 = step.reduce_sum %g dims = [0] keepdim : tensor<16x8xf32> -> tensor<1x8xf32>
  %m2 = step.matmul %x0, %g transpose_a : tensor<16x4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %s3 = step.fusion "reduction"(%g) : (tensor<16x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<16x8xf32>):
    %r = step.reduce_sum %a dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
    step.yield %r : tensor<8xf32>
  }
  %s4 = step.reduce_sum %bg dims = [0, 1] : tensor<2x16x8xf32> -> tensor<8xf32>
  %m4 = step.matmul %bx, %bg transpose_a : tensor<2x16x4xf32>, tensor<2x16x8xf32> -> tensor<2x4x8xf32>
  %hc = step.cast %h : tensor<16x8xbf16> -> tensor<16x8xf32>
  %s5 = step.reduce_sum %hc dims = [0] : tensor<16x8xf32> -> tensor<8xf32>
  %m5 = step.matmul %hx, %h transpose_a : tensor<16x4xbf16>, tensor<16x8xbf16> -> tensor<4x8xbf16>
  return %n0, %m0, %s1, %m1, %s2, %m2, %s3, %m4, %s4, %m5, %s5, %se, %me : tensor<8xf32>, tensor<4x8xf32>, tensor<16xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>
}
