// RUN: step-opt %s -split-input-file --step-fuse-loop-reductions | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse --step-fuse-loop-reductions | FileCheck %s --check-prefix=PIPE

// A bias gradient after GELU's backward, as step-fuse leaves it: a loop
// writing the bf16 gradient, a bare column sum of it, then the matmul
// that reads it again. One reduction fusion at the loop: the loop's body,
// the sum reading its value, the gradient yielded for the matmul.
// CHECK-LABEL: func.func @bias_grad
// CHECK-SAME: (%[[A:[^:]+]]: tensor<64x48xf32>, %[[B:[^:]+]]: tensor<64x48xf32>, %[[W:[^:]+]]: tensor<48x16xbf16>)
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "reduction"(%[[A]], %[[B]]) : (tensor<64x48xf32>, tensor<64x48xf32>) -> (tensor<64x48xbf16>, tensor<48xbf16>)
// CHECK-NEXT: ^bb0(%[[BA:[^:]+]]: tensor<64x48xf32>, %[[BB:[^:]+]]: tensor<64x48xf32>):
// CHECK-NEXT: %[[T:.+]] = step.tanh %[[BA]]
// CHECK-NEXT: %[[M:.+]] = step.mul %[[T]], %[[BB]]
// CHECK-NEXT: %[[G:.+]] = step.cast %[[M]] : tensor<64x48xf32> -> tensor<64x48xbf16>
// CHECK-NEXT: %[[S:.+]] = step.reduce_sum %[[G]] dims = [0] : tensor<64x48xbf16> -> tensor<48xbf16>
// CHECK-NEXT: step.yield %[[G]], %[[S]] : tensor<64x48xbf16>, tensor<48xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: %[[D:.+]] = step.matmul %[[F]]#0, %[[W]]
// CHECK-NEXT: return %[[D]], %[[F]]#1
func.func @bias_grad(%a: tensor<64x48xf32>, %b: tensor<64x48xf32>, %w: tensor<48x16xbf16>) -> (tensor<64x16xbf16>, tensor<48xbf16>) {
  %g = step.fusion "loop"(%a, %b) : (tensor<64x48xf32>, tensor<64x48xf32>) -> tensor<64x48xbf16> {
  ^bb0(%x: tensor<64x48xf32>, %y: tensor<64x48xf32>):
    %0 = step.tanh %x : tensor<64x48xf32>
    %1 = step.mul %0, %y : tensor<64x48xf32>
    %2 = step.cast %1 : tensor<64x48xf32> -> tensor<64x48xbf16>
    step.yield %2 : tensor<64x48xbf16>
  }
  %s = step.reduce_sum %g dims = [0] : tensor<64x48xbf16> -> tensor<48xbf16>
  %d = step.matmul %g, %w : tensor<64x48xbf16>, tensor<48x16xbf16> -> tensor<64x16xbf16>
  return %d, %s : tensor<64x16xbf16>, tensor<48xbf16>
}

// -----

// The matmul reads the loop's value before the sum: the sum (96 bytes)
// moves up to the loop over it, and the matmul reads the fusion's result.
// CHECK-LABEL: func.func @reader_between
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "reduction"
// CHECK: step.reduce_sum
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[D:.+]] = step.matmul %[[F]]#0
// CHECK-NEXT: return %[[D]], %[[F]]#1
func.func @reader_between(%a: tensor<64x48xf32>, %w: tensor<48x16xbf16>) -> (tensor<64x16xbf16>, tensor<48xbf16>) {
  %g = step.fusion "loop"(%a) : (tensor<64x48xf32>) -> tensor<64x48xbf16> {
  ^bb0(%x: tensor<64x48xf32>):
    %0 = step.tanh %x : tensor<64x48xf32>
    %1 = step.cast %0 : tensor<64x48xf32> -> tensor<64x48xbf16>
    step.yield %1 : tensor<64x48xbf16>
  }
  %d = step.matmul %g, %w : tensor<64x48xbf16>, tensor<48x16xbf16> -> tensor<64x16xbf16>
  %s = step.reduce_sum %g dims = [0] : tensor<64x48xbf16> -> tensor<48xbf16>
  return %d, %s : tensor<64x16xbf16>, tensor<48xbf16>
}

// -----

// Two sibling sums (a fusion widening the loop's value, and a bare sum of
// the other result) both join; the loop's f32 value nothing else reads
// is not yielded.
// CHECK-LABEL: func.func @siblings
// CHECK-NEXT: %[[F:.+]]:3 = step.fusion "reduction"
// CHECK-SAME: -> (tensor<32x8xbf16>, tensor<8xf32>, tensor<8xbf16>)
// CHECK: step.reduce_sum %{{.+}} dims = [0] : tensor<32x8xf32> -> tensor<8xf32>
// CHECK: step.reduce_sum %{{.+}} dims = [0] : tensor<32x8xbf16> -> tensor<8xbf16>
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
func.func @siblings(%a: tensor<32x8xf32>) -> (tensor<32x8xbf16>, tensor<8xf32>, tensor<8xbf16>) {
  %g:2 = step.fusion "loop"(%a) : (tensor<32x8xf32>) -> (tensor<32x8xf32>, tensor<32x8xbf16>) {
  ^bb0(%x: tensor<32x8xf32>):
    %0 = step.exp %x : tensor<32x8xf32>
    %1 = step.cast %0 : tensor<32x8xf32> -> tensor<32x8xbf16>
    step.yield %0, %1 : tensor<32x8xf32>, tensor<32x8xbf16>
  }
  %s = step.fusion "reduction"(%g#0) : (tensor<32x8xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<32x8xf32>):
    %0 = step.mul %x, %x : tensor<32x8xf32>
    %1 = step.reduce_sum %0 dims = [0] : tensor<32x8xf32> -> tensor<8xf32>
    step.yield %1 : tensor<8xf32>
  }
  %t = step.reduce_sum %g#1 dims = [0] : tensor<32x8xbf16> -> tensor<8xbf16>
  return %g#1, %s, %t : tensor<32x8xbf16>, tensor<8xf32>, tensor<8xbf16>
}

// -----

// Refused: a sum whose 2 MiB result would move up to the loop over a
// matmul (only small results move over other ops); and a sum that
// reads the loop's value through a reshape (not the loop's result itself:
// left to its own kernel).
// CHECK-LABEL: func.func @refused
// CHECK-COUNT-2: step.fusion "loop"
// CHECK-NOT: step.fusion "reduction"
// CHECK: return
func.func @refused(%a: tensor<512x1024xf32>, %w: tensor<1024x8xf32>, %c: tensor<16x4xf32>) -> (tensor<512x8xf32>, tensor<1024x512xf32>, tensor<4xf32>) {
  %g = step.fusion "loop"(%a) : (tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  ^bb0(%x: tensor<512x1024xf32>):
    %0 = step.exp %x : tensor<512x1024xf32>
    step.yield %0 : tensor<512x1024xf32>
  }
  %d = step.matmul %g, %w : tensor<512x1024xf32>, tensor<1024x8xf32> -> tensor<512x8xf32>
  %s = step.fusion "reduction"(%g) : (tensor<512x1024xf32>) -> tensor<1024x512xf32> {
  ^bb0(%x: tensor<512x1024xf32>):
    %0 = step.reshape %x : tensor<512x1024xf32> -> tensor<1024x512x1xf32>
    %1 = step.reduce_sum %0 dims = [2] : tensor<1024x512x1xf32> -> tensor<1024x512xf32>
    step.yield %1 : tensor<1024x512xf32>
  }
  %h = step.fusion "loop"(%c) : (tensor<16x4xf32>) -> tensor<16x4xf32> {
  ^bb0(%x: tensor<16x4xf32>):
    %0 = step.exp %x : tensor<16x4xf32>
    step.yield %0 : tensor<16x4xf32>
  }
  %r = step.reshape %h : tensor<16x4xf32> -> tensor<4x4x4xf32>
  %t = step.reduce_sum %r dims = [0, 1] : tensor<4x4x4xf32> -> tensor<4xf32>
  return %d, %s, %t : tensor<512x8xf32>, tensor<1024x512xf32>, tensor<4xf32>
}

// -----

// Two 40 KiB row sums behind a matmul: moved up to the loop, their
// results would live over it; the first fits the 64 KiB allowance, the
// second, whose bytes would come to 80 KiB with it, stays apart.
// CHECK-LABEL: func.func @budget
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "reduction"
// CHECK-SAME: -> (tensor<10240x4xf32>, tensor<10240xf32>)
// CHECK: step.matmul %[[F]]#0
// CHECK-NEXT: step.reduce_max %[[F]]#0 dims = [1]
func.func @budget(%a: tensor<10240x4xf32>, %w: tensor<4x4xf32>) -> (tensor<10240x4xf32>, tensor<10240xf32>, tensor<10240xf32>) {
  %g = step.fusion "loop"(%a) : (tensor<10240x4xf32>) -> tensor<10240x4xf32> {
  ^bb0(%x: tensor<10240x4xf32>):
    %0 = step.exp %x : tensor<10240x4xf32>
    step.yield %0 : tensor<10240x4xf32>
  }
  %d = step.matmul %g, %w : tensor<10240x4xf32>, tensor<4x4xf32> -> tensor<10240x4xf32>
  %s = step.reduce_sum %g dims = [1] : tensor<10240x4xf32> -> tensor<10240xf32>
  %t = step.reduce_max %g dims = [1] : tensor<10240x4xf32> -> tensor<10240xf32>
  return %d, %s, %t : tensor<10240x4xf32>, tensor<10240xf32>, tensor<10240xf32>
}

// -----

// Through step-fuse: the loop that packs q/k/v gradients (pads and adds)
// and the bias gradient's column sum become one reduction fusion.
// PIPE-LABEL: func.func @packed
// PIPE-NEXT: %[[F:.+]]:2 = step.fusion "reduction"
// PIPE: step.pad
// PIPE: step.pad
// PIPE: step.add
// PIPE: step.reduce_sum %{{.+}} dims = [0] : tensor<16x12xbf16> -> tensor<12xbf16>
// PIPE: return %[[F]]#0, %[[F]]#1
func.func @packed(%q: tensor<16x6xbf16>, %k: tensor<16x6xbf16>) -> (tensor<16x12xbf16>, tensor<12xbf16>) {
  %pq = step.pad %q low = [0, 0] high = [0, 6] value = 0.0 : tensor<16x6xbf16> -> tensor<16x12xbf16>
  %pk = step.pad %k low = [0, 6] high = [0, 0] value = 0.0 : tensor<16x6xbf16> -> tensor<16x12xbf16>
  %g = step.add %pq, %pk : tensor<16x12xbf16>
  %s = step.reduce_sum %g dims = [0] : tensor<16x12xbf16> -> tensor<12xbf16>
  return %g, %s : tensor<16x12xbf16>, tensor<12xbf16>
}

// -----

// A bare elementwise op is a loop of one: GELU's backward (one
// step.gelu_grad, which step-fuse leaves unfused) and the bias gradient.
// CHECK-LABEL: func.func @bare_gelu_grad
// CHECK-NEXT: %[[F:.+]]:2 = step.fusion "reduction"(%arg0, %arg1)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %[[G:.+]] = step.gelu_grad
// CHECK-NEXT: %[[S:.+]] = step.reduce_sum %[[G]] dims = [0]
// CHECK-NEXT: step.yield %[[G]], %[[S]]
// CHECK: step.matmul %[[F]]#0
func.func @bare_gelu_grad(%g: tensor<64x48xbf16>, %x: tensor<64x48xbf16>, %w: tensor<48x16xbf16>) -> (tensor<64x16xbf16>, tensor<48xbf16>) {
  %d = step.gelu_grad %g, %x approximate tanh : tensor<64x48xbf16>
  %s = step.reduce_sum %d dims = [0] : tensor<64x48xbf16> -> tensor<48xbf16>
  %m = step.matmul %d, %w : tensor<64x48xbf16>, tensor<48x16xbf16> -> tensor<64x16xbf16>
  return %m, %s : tensor<64x16xbf16>, tensor<48xbf16>
}

// -----

// A reader of the loop past the 16 ops scanned after it (step-fuse put the
// sum and its cast where the cast was, by the optimizer: --clip) still
// joins, its 192 bytes within the allowance; an op past the window that
// does not read the loop stays where it is.
// (The last exp and its sum, within the window, become one too.)
// CHECK-LABEL: func.func @far_reader
// CHECK-NEXT: %[[F:.+]] = step.fusion "reduction"(%arg0, %arg1)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.gelu_grad
// CHECK-NEXT: step.reduce_sum
// CHECK-NEXT: step.cast
// CHECK-NEXT: step.yield
// CHECK-NEXT: }
// CHECK-COUNT-16: step.exp
// CHECK-NEXT: %[[O:.+]] = step.fusion "reduction"
// CHECK: return %[[O]], %[[F]]
func.func @far_reader(%g: tensor<64x48xbf16>, %x: tensor<64x48xbf16>, %y: tensor<64x48xf32>) -> (tensor<48xf32>, tensor<48xf32>) {
  %d = step.gelu_grad %g, %x approximate tanh : tensor<64x48xbf16>
  %e0 = step.exp %y : tensor<64x48xf32>
  %e1 = step.exp %e0 : tensor<64x48xf32>
  %e2 = step.exp %e1 : tensor<64x48xf32>
  %e3 = step.exp %e2 : tensor<64x48xf32>
  %e4 = step.exp %e3 : tensor<64x48xf32>
  %e5 = step.exp %e4 : tensor<64x48xf32>
  %e6 = step.exp %e5 : tensor<64x48xf32>
  %e7 = step.exp %e6 : tensor<64x48xf32>
  %e8 = step.exp %e7 : tensor<64x48xf32>
  %e9 = step.exp %e8 : tensor<64x48xf32>
  %e10 = step.exp %e9 : tensor<64x48xf32>
  %e11 = step.exp %e10 : tensor<64x48xf32>
  %e12 = step.exp %e11 : tensor<64x48xf32>
  %e13 = step.exp %e12 : tensor<64x48xf32>
  %e14 = step.exp %e13 : tensor<64x48xf32>
  %e15 = step.exp %e14 : tensor<64x48xf32>
  %e16 = step.exp %e15 : tensor<64x48xf32>
  %o = step.reduce_sum %e16 dims = [0] : tensor<64x48xf32> -> tensor<48xf32>
  %b = step.fusion "reduction"(%d) : (tensor<64x48xbf16>) -> tensor<48xf32> {
  ^bb0(%v: tensor<64x48xbf16>):
    %0 = step.reduce_sum %v dims = [0] : tensor<64x48xbf16> -> tensor<48xbf16>
    %1 = step.cast %0 : tensor<48xbf16> -> tensor<48xf32>
    step.yield %1 : tensor<48xf32>
  }
  return %o, %b : tensor<48xf32>, tensor<48xf32>
}

// -----

// Past the window, a reader that also reads a value made after the loop
// stays where it is (the fusion sits at the loop).
// (The last exp, a loop of one, joins the reduction within its window.)
// CHECK-LABEL: func.func @far_reader_late_operand
// CHECK-NEXT: %[[D:.+]] = step.gelu_grad
// CHECK-COUNT-16: step.exp
// CHECK-NEXT: %[[R:.+]] = step.fusion "reduction"(%{{.+}}, %[[D]])
// CHECK: return %[[D]], %[[R]]
func.func @far_reader_late_operand(%g: tensor<64x48xbf16>, %x: tensor<64x48xbf16>, %y: tensor<64x48xf32>) -> (tensor<64x48xbf16>, tensor<48xf32>) {
  %d = step.gelu_grad %g, %x approximate tanh : tensor<64x48xbf16>
  %e0 = step.exp %y : tensor<64x48xf32>
  %e1 = step.exp %e0 : tensor<64x48xf32>
  %e2 = step.exp %e1 : tensor<64x48xf32>
  %e3 = step.exp %e2 : tensor<64x48xf32>
  %e4 = step.exp %e3 : tensor<64x48xf32>
  %e5 = step.exp %e4 : tensor<64x48xf32>
  %e6 = step.exp %e5 : tensor<64x48xf32>
  %e7 = step.exp %e6 : tensor<64x48xf32>
  %e8 = step.exp %e7 : tensor<64x48xf32>
  %e9 = step.exp %e8 : tensor<64x48xf32>
  %e10 = step.exp %e9 : tensor<64x48xf32>
  %e11 = step.exp %e10 : tensor<64x48xf32>
  %e12 = step.exp %e11 : tensor<64x48xf32>
  %e13 = step.exp %e12 : tensor<64x48xf32>
  %e14 = step.exp %e13 : tensor<64x48xf32>
  %e15 = step.exp %e14 : tensor<64x48xf32>
  %e16 = step.exp %e15 : tensor<64x48xf32>
  %b = step.fusion "reduction"(%d, %e16) : (tensor<64x48xbf16>, tensor<64x48xf32>) -> tensor<48xf32> {
  ^bb0(%v: tensor<64x48xbf16>, %u: tensor<64x48xf32>):
    %0 = step.cast %v : tensor<64x48xbf16> -> tensor<64x48xf32>
    %1 = step.mul %0, %u : tensor<64x48xf32>
    %2 = step.reduce_sum %1 dims = [0] : tensor<64x48xf32> -> tensor<48xf32>
    step.yield %2 : tensor<48xf32>
  }
  return %d, %b : tensor<64x48xbf16>, tensor<48xf32>
}
