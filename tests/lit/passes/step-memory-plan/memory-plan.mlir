// RUN: step-opt %s -split-input-file --step-memory-plan="func=f alignment=64" | FileCheck %s
// RUN: not step-opt %s -split-input-file --step-memory-plan="func=nope" 2>&1 | FileCheck %s --check-prefix=NOFUNC
// RUN: not step-opt %s -split-input-file --step-memory-plan="func=f alignment=48" 2>&1 | FileCheck %s --check-prefix=ALIGN

// A chain of three 256-byte values: %a dies when %b is made, so %c reuses
// %a's bytes; %b overlaps both and gets the other slot. Constants and
// arguments take no arena space.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: attributes {step.arena_bytes = 512 : i64, step.arena_bytes_no_reuse = 768 : i64}
// CHECK: %[[C:.+]] = step.constant
// CHECK-NOT: step.offsets
// CHECK: %[[A:.+]] = step.add %arg0, %[[C]] {step.offsets = array<i64: 0>}
// CHECK: %[[B:.+]] = step.exp %[[A]] {step.offsets = array<i64: 256>}
// CHECK: %[[D:.+]] = step.exp %[[B]] {step.offsets = array<i64: 0>}
// CHECK: return %[[D]]

// NOFUNC: step-memory-plan: no function @nope with a body
// ALIGN: step-memory-plan: alignment 48 must be a power of two
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %c = step.constant dense<1.0> : tensor<64xf32>
  %a = step.add %x, %c : tensor<64xf32>
  %b = step.exp %a : tensor<64xf32>
  %d = step.exp %b : tensor<64xf32>
  return %d : tensor<64xf32>
}

// -----

// Sizes are aligned: a 4-byte scalar and a 12-byte vector both live at
// once take two 64-byte slots; the bigger value is placed first.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: step.arena_bytes = 68 : i64
// CHECK: step.exp %arg0 {step.offsets = array<i64: 0>} : tensor<3xf32>
// CHECK: step.reduce_sum %{{.+}} {step.offsets = array<i64: 64>}
func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
  %e = step.exp %x : tensor<3xf32>
  %s = step.reduce_sum %e dims = [0] : tensor<3xf32> -> tensor<f32>
  return %e, %s : tensor<3xf32>, tensor<f32>
}

// -----

// A reshape (or stop_gradient) of a transient is a view: it shares its
// operand's offset, and the pair lives as one value until the last use of
// either, so %e, live across the view's users, is not overwritten by %t.
// A reshape of an argument is a copy with its own slot.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: step.arena_bytes = 192 : i64
// CHECK: %[[E:.+]] = step.exp %arg0 {step.offsets = array<i64: 0>}
// CHECK: step.reshape %[[E]] {step.offsets = array<i64: 0>}
// CHECK: step.stop_gradient %{{.+}} {step.offsets = array<i64: 0>}
// CHECK: step.tanh %{{.+}} {step.offsets = array<i64: 64>}
// CHECK: step.reshape %arg0 {step.offsets = array<i64: 128>}
func.func @f(%x: tensor<4x4xf32>) -> (tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>) {
  %e = step.exp %x : tensor<4x4xf32>
  %r = step.reshape %e : tensor<4x4xf32> -> tensor<16xf32>
  %s = step.stop_gradient %r : tensor<16xf32>
  %t = step.tanh %s : tensor<16xf32>
  %c = step.reshape %x : tensor<4x4xf32> -> tensor<16xf32>
  return %t, %e, %c : tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>
}

// -----

// A donated result (step.donated: result 1 into argument 0,
// compiler/pipeline/Donation.cpp) is written into its argument's buffer:
// no arena bytes, offset -1; the op's other result is placed as before
// (beside %e, its operand): 512 bytes where three values would take 768.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: step.arena_bytes = 512 : i64, step.arena_bytes_no_reuse = 512 : i64
// CHECK: step.exp %arg1 {step.offsets = array<i64: 0>}
// CHECK: step.fusion
// CHECK-SAME: step.donated = array<i64: 1, 0>, step.offsets = array<i64: 256, -1>
func.func @f(%p: tensor<64xf32>, %g: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %e = step.exp %g : tensor<64xf32>
  %r:2 = step.fusion "loop" (%e, %p) {step.donated = array<i64: 1, 0>} : (tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  ^bb0(%a: tensor<64xf32>, %b: tensor<64xf32>):
    %s = step.neg %a : tensor<64xf32>
    %t = step.sub %b, %a : tensor<64xf32>
    step.yield %s, %t : tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1 : tensor<64xf32>, tensor<64xf32>
}
