// RUN: step-opt %s --step-offload="mode=auto fuse=false device-flops=1e3 link-bandwidth=4096" | FileCheck %s --check-prefix=AUTO
// RUN: step-opt %s --step-offload="mode=all fuse=false device-flops=1e3 link-bandwidth=4096" | FileCheck %s --check-prefix=ALL
// RUN: step-opt %s --step-offload="mode=auto fuse=false" | FileCheck %s --check-prefix=FAST
// RUN: step-opt %s --step-offload="mode=none fuse=false" | FileCheck %s --check-prefix=NONE
// RUN: step-opt %s --step-offload="mode=all" | step-opt --step-memory-plan | FileCheck %s --check-prefix=PLAN

// A two-layer step on a slow machine (1e3 FLOP/s, 4096 B/s of link), so
// every time below is seconds that can be checked by hand. The backward
// reads two forward values: t1 [64, 16] f32 (4 KiB, by %dw2) and t2
// [64, 256] f32 (64 KiB, by %sq2). Ops and their times (FLOPs / 1e3):
//   0 h1 = x w1 (32.8 s)  1 t1 = tanh (1.0 s)  2 h2 = t1 w2 (524 s)
//   3 t2 = tanh (16.4 s)  4 loss (16.4 s)      5 one (0)
//   6 sq2 (16.4 s)  7 d2 (16.4 s)  8 dt1 = d2 w2^T (524 s)  9 dw2 = t1^T d2
// A copy of t1 takes 1 s (+5 us), of t2 16 s.
//  - t1: its copy out, started after op 1, is done during op 2, so it is
//    offloaded before op 3; its reload, issued before op 8, arrives during
//    op 8, before op 9 reads it. Hidden: auto takes it.
//  - t2: last read by the forward at op 4, first by the backward at op 6;
//    its copy back cannot start before op 6 needs it (16 s exposed): auto
//    leaves it on the device.
// Planned arena (256-byte alignment, no fusion; the peak is the end of the
// highest value, the 4-byte loss): before, at op 6 t1, t2, sq2 and loss
// are live: 4096 + 2 * 65536 + 4 = 135172 B. After offloading t1, nothing
// between ops 3 and 8 holds it: 131076 B.

// AUTO-LABEL: func.func @train_step
// AUTO-SAME: step.offload = {candidates = 2 : i64, exposed_seconds = 0.000000e+00 : f64, host_bytes = 4096 : i64, mode = "auto", {{.*}}offloaded = 1 : i64, offloaded_bytes = 4096 : i64, peak_after = 131076 : i64, peak_before = 135172 : i64}
// AUTO:      %[[T1:.+]] = step.tanh %{{.+}} : tensor<64x16xf32>
// AUTO-NEXT: %[[H2:.+]] = step.matmul %[[T1]], %arg2
// AUTO-NEXT: %[[HOST:.+]] = step.offload %[[T1]] : tensor<64x16xf32>
// AUTO-NEXT: %[[T2:.+]] = step.tanh %[[H2]]
// AUTO-NOT:  step.offload
// AUTO:      %[[D2:.+]] = step.sub
// AUTO-NEXT: %[[BACK:.+]] = step.reload %[[HOST]] : tensor<64x16xf32>
// AUTO-NEXT: %[[DT1:.+]] = step.matmul %[[D2]], %arg2 transpose_b
// AUTO-NEXT: %[[DW2:.+]] = step.matmul %[[BACK]], %[[D2]] transpose_a
// AUTO-NEXT: return %{{.+}}, %[[DW2]], %[[DT1]]

// Mode all offloads both just in time (t1 after op 2, back before op 9;
// t2 after op 4, back before op 6): the same peak; both copies out are
// hidden (t2's by op 4), both copies back exposed, 16 s + 1 s (+ 2 * 5
// us); the host arena holds both at once.
// ALL-LABEL: func.func @train_step
// ALL-SAME: step.offload = {candidates = 2 : i64, exposed_seconds = 17.0000{{[0-9]+}} : f64, host_bytes = 69632 : i64, mode = "all", {{.*}}offloaded = 2 : i64, offloaded_bytes = 69632 : i64, peak_after = 131076 : i64, peak_before = 135172 : i64}
// ALL:      %[[H2:.+]] = step.matmul %{{.+}}, %arg2 :
// ALL-NEXT: %[[HOST1:.+]] = step.offload %{{.+}} : tensor<64x16xf32>
// ALL-NEXT: %[[T2:.+]] = step.tanh %[[H2]]
// ALL-NEXT: %[[LOSS:.+]] = step.reduce_sum %[[T2]]
// ALL-NEXT: %[[HOST2:.+]] = step.offload %[[T2]] : tensor<64x256xf32>
// ALL-NEXT: step.constant
// ALL-NEXT: %[[BACK2:.+]] = step.reload %[[HOST2]]
// ALL-NEXT: step.mul %[[BACK2]], %[[BACK2]]
// ALL:      %[[BACK1:.+]] = step.reload %[[HOST1]]
// ALL-NEXT: step.matmul %[[BACK1]], %{{.+}} transpose_a

// On the default machine (200 TFLOP/s, 25 GB/s) nothing here takes longer
// than a copy's fixed 5 us, so no copy can hide.
// FAST-LABEL: func.func @train_step
// FAST-SAME: offloaded = 0 : i64
// FAST-NOT:  step.offload

// NONE-LABEL: func.func @train_step
// NONE-SAME: candidates = 2 : i64, exposed_seconds = 0.000000e+00 : f64, host_bytes = 0 : i64, mode = "none"
// NONE-NOT:  step.offload

// The memory plan puts the offloaded values in the host arena: t1 from
// op 1 (its copy starts there) to its reload, t2 from op 3 to its reload;
// they overlap, so they take 4096 + 65536 bytes.
// PLAN-LABEL: func.func @train_step
// PLAN-SAME: step.host_bytes = 69632 : i64
// PLAN:      step.offload %{{.+}} {step.offsets = array<i64: 65536>} : tensor<64x16xf32>
// PLAN:      step.offload %{{.+}} {step.offsets = array<i64: 0>} : tensor<64x256xf32>

func.func @train_step(%x: tensor<64x16xf32> {step.kind = "input", step.name = "x"},
                      %w1: tensor<16x16xf32> {step.kind = "param", step.name = "w1"},
                      %w2: tensor<16x256xf32> {step.kind = "param", step.name = "w2"})
    -> (tensor<f32>, tensor<16x256xf32>, tensor<64x16xf32>) {
  %h1 = step.matmul %x, %w1 : tensor<64x16xf32>, tensor<16x16xf32> -> tensor<64x16xf32>
  %t1 = step.tanh %h1 : tensor<64x16xf32>
  %h2 = step.matmul %t1, %w2 : tensor<64x16xf32>, tensor<16x256xf32> -> tensor<64x256xf32>
  %t2 = step.tanh %h2 : tensor<64x256xf32>
  %loss = step.reduce_sum %t2 dims = [0, 1] : tensor<64x256xf32> -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<64x256xf32>
  %sq2 = step.mul %t2, %t2 : tensor<64x256xf32>
  %d2 = step.sub %one, %sq2 : tensor<64x256xf32>
  %dt1 = step.matmul %d2, %w2 transpose_b : tensor<64x256xf32>, tensor<16x256xf32> -> tensor<64x16xf32>
  %dw2 = step.matmul %t1, %d2 transpose_a : tensor<64x16xf32>, tensor<64x256xf32> -> tensor<16x256xf32>
  return %loss, %dw2, %dt1 : tensor<f32>, tensor<16x256xf32>, tensor<64x16xf32>
}
