// RUN: step-opt %s --step-remat="mode=max fuse=false" | FileCheck %s --check-prefix=MAX
// RUN: step-opt %s --step-remat="mode=max fuse=false exact-limit=0" | FileCheck %s --check-prefix=MAX
// RUN: step-opt %s --step-remat="mode=budget budget=33000 fuse=false" | FileCheck %s --check-prefix=FITS
// RUN: not step-opt %s --step-remat="mode=budget budget=1000 fuse=false" 2>&1 | FileCheck %s --check-prefix=TOOSMALL

// Two blocks r1 = tanh(x w1) w2, r2 = tanh(r1 w3) w4 over 64 rows, and
// their backward written out. Every forward value is a cut point (a
// chain); the backward reads a1, r1 and a2, so the segments are {h1, a1},
// {r1} and {h2, a2} (r2 and the loss are no segment). Recomputing the
// first block (h1 and a1 from x, a matmul and a tanh) lowers the planned
// peak from 36868 to 29700 bytes: a1 (8 KiB) no longer lives through the
// second block's backward. Recomputing a2 lowers nothing, since the
// backward starts by reading it; both solvers (exact, and greedy with
// pruning) leave it kept.

// MAX-LABEL: func.func @train_step
// MAX-SAME:  mode = "max", peak_after = 29700 : i64, peak_before = 36868 : i64, recomputed_flops = 34816 : i64, recomputed_ops = 2 : i64
// MAX-SAME:  segments = 3 : i64, segments_recomputed = 1 : i64
// MAX:       step.matmul %{{.*}}, %arg3 :
// MAX-NEXT:  %[[A2:.*]] = step.tanh
// MAX:       step.reduce_sum
// MAX:       step.mul %[[A2]], %[[A2]]
// MAX:       %[[H1:.*]] = step.matmul %arg0, %arg1 {step.recomputed}
// MAX-NEXT:  %[[A1:.*]] = step.tanh %[[H1]] {step.recomputed}
// MAX-NEXT:  step.matmul %[[A1]], %{{.*}} transpose_a
// MAX-NEXT:  step.mul %[[A1]], %[[A1]]
// MAX-NOT:   step.recomputed

// A budget between the two peaks: the cheapest plan that fits.
// FITS-LABEL: func.func @train_step
// FITS-SAME:  mode = "budget", peak_after = 29700 : i64, peak_before = 36868 : i64

// TOOSMALL: error: step-remat: no plan fits the budget of 1000 bytes: the smallest planned peak found is 29700 bytes (without recomputation: 36868 bytes)

func.func @train_step(%x: tensor<64x8xf32> {step.kind = "input", step.name = "x"},
                      %w1: tensor<8x32xf32> {step.kind = "param", step.name = "w1"},
                      %w2: tensor<32x8xf32> {step.kind = "param", step.name = "w2"},
                      %w3: tensor<8x32xf32> {step.kind = "param", step.name = "w3"},
                      %w4: tensor<32x8xf32> {step.kind = "param", step.name = "w4"})
    -> (tensor<f32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32x8xf32>) {
  %h1 = step.matmul %x, %w1 : tensor<64x8xf32>, tensor<8x32xf32> -> tensor<64x32xf32>
  %a1 = step.tanh %h1 : tensor<64x32xf32>
  %r1 = step.matmul %a1, %w2 : tensor<64x32xf32>, tensor<32x8xf32> -> tensor<64x8xf32>
  %h2 = step.matmul %r1, %w3 : tensor<64x8xf32>, tensor<8x32xf32> -> tensor<64x32xf32>
  %a2 = step.tanh %h2 : tensor<64x32xf32>
  %r2 = step.matmul %a2, %w4 : tensor<64x32xf32>, tensor<32x8xf32> -> tensor<64x8xf32>
  %loss = step.reduce_sum %r2 dims = [0, 1] : tensor<64x8xf32> -> tensor<f32>
  %dr2 = step.constant dense<1.0> : tensor<64x8xf32>
  %one = step.constant dense<1.0> : tensor<64x32xf32>
  %dw4 = step.matmul %a2, %dr2 transpose_a : tensor<64x32xf32>, tensor<64x8xf32> -> tensor<32x8xf32>
  %da2 = step.matmul %dr2, %w4 transpose_b : tensor<64x8xf32>, tensor<32x8xf32> -> tensor<64x32xf32>
  %sq2 = step.mul %a2, %a2 : tensor<64x32xf32>
  %g2 = step.sub %one, %sq2 : tensor<64x32xf32>
  %dh2 = step.mul %da2, %g2 : tensor<64x32xf32>
  %dw3 = step.matmul %r1, %dh2 transpose_a : tensor<64x8xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  %dr1 = step.matmul %dh2, %w3 transpose_b : tensor<64x32xf32>, tensor<8x32xf32> -> tensor<64x8xf32>
  %da1 = step.matmul %dr1, %w2 transpose_b : tensor<64x8xf32>, tensor<32x8xf32> -> tensor<64x32xf32>
  %dw2 = step.matmul %a1, %dr1 transpose_a : tensor<64x32xf32>, tensor<64x8xf32> -> tensor<32x8xf32>
  %sq1 = step.mul %a1, %a1 : tensor<64x32xf32>
  %g1 = step.sub %one, %sq1 : tensor<64x32xf32>
  %dh1 = step.mul %da1, %g1 : tensor<64x32xf32>
  %dw1 = step.matmul %x, %dh1 transpose_a : tensor<64x8xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  return %loss, %dw1, %dw2, %dw3, %dw4 : tensor<f32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<8x32xf32>, tensor<32x8xf32>
}
