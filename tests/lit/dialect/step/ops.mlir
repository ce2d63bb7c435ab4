// RUN: step-opt %s | step-opt | FileCheck %s

// Round trip of every step op in its custom form: each element type the op
// accepts, dynamic (?) and zero-size dims, rank-0 tensors and every
// attribute variant. Ops print exactly as written, except that floats are
// normalized (1.0 -> 1.000000e+00) and a repeated operand type is printed once.

//===----------------------------------------------------------------------===//
// Unary: step.neg, step.abs, step.relu (f32, f16, bf16, i32, i64)
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @neg
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<2x3xi32>, %[[I64:.+]]: tensor<?xi64>)
func.func @neg(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>, %i32: tensor<2x3xi32>, %i64: tensor<?xi64>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.neg %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.neg %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.neg %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.neg %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.neg %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.neg %bf16 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.neg %[[I32]] : tensor<2x3xi32>{{$}}
  %3 = step.neg %i32 : tensor<2x3xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.neg %[[I64]] : tensor<?xi64>{{$}}
  %4 = step.neg %i64 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @abs
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<2x3xi32>, %[[I64:.+]]: tensor<?xi64>)
func.func @abs(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>, %i32: tensor<2x3xi32>, %i64: tensor<?xi64>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.abs %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.abs %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.abs %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.abs %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.abs %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.abs %bf16 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.abs %[[I32]] : tensor<2x3xi32>{{$}}
  %3 = step.abs %i32 : tensor<2x3xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.abs %[[I64]] : tensor<?xi64>{{$}}
  %4 = step.abs %i64 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @relu
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<2x3xi32>, %[[I64:.+]]: tensor<?xi64>)
func.func @relu(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>, %i32: tensor<2x3xi32>, %i64: tensor<?xi64>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.relu %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.relu %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.relu %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.relu %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.relu %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.relu %bf16 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.relu %[[I32]] : tensor<2x3xi32>{{$}}
  %3 = step.relu %i32 : tensor<2x3xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.relu %[[I64]] : tensor<?xi64>{{$}}
  %4 = step.relu %i64 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>, tensor<2x3xi32>, tensor<?xi64>
}

//===----------------------------------------------------------------------===//
// Unary float-only: step.exp ... step.cos (f32, f16, bf16)
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @exp
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @exp(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.exp %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.exp %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.exp %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.exp %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.exp %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.exp %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @log
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @log(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.log %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.log %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.log %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.log %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.log %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.log %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @tanh
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @tanh(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.tanh %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.tanh %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.tanh %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.tanh %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.tanh %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.tanh %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @sigmoid
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @sigmoid(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.sigmoid %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.sigmoid %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.sigmoid %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.sigmoid %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.sigmoid %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.sigmoid %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @sqrt
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @sqrt(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.sqrt %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.sqrt %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.sqrt %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.sqrt %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.sqrt %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.sqrt %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @rsqrt
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @rsqrt(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.rsqrt %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.rsqrt %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.rsqrt %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.rsqrt %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.rsqrt %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.rsqrt %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @erf
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @erf(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.erf %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.erf %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.erf %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.erf %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.erf %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.erf %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @sin
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @sin(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.sin %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.sin %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.sin %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.sin %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.sin %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.sin %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

// CHECK-LABEL: func.func @cos
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0x3xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @cos(%f32: tensor<4x?xf32>, %f16: tensor<0x3xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.cos %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.cos %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.cos %[[F16]] : tensor<0x3xf16>{{$}}
  %1 = step.cos %f16 : tensor<0x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.cos %[[BF16]] : tensor<bf16>{{$}}
  %2 = step.cos %bf16 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<4x?xf32>, tensor<0x3xf16>, tensor<bf16>
}

//===----------------------------------------------------------------------===//
// Binary: step.add ... step.min (f32, f16, bf16, i32, i64); step.pow (floats)
//
// The first case spells both operand types although they are equal: the
// printer writes one. A dynamic dim in one operand takes the other's size.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @add
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>, %[[A3:.+]]: tensor<0x4xi32>, %[[B3:.+]]: tensor<0x4xi32>, %[[A4:.+]]: tensor<?xi64>, %[[B4:.+]]: tensor<?xi64>)
func.func @add(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.add %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.add %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.add %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.add %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.add %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.add %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.add %[[A3]], %[[B3]] : tensor<0x4xi32>{{$}}
  %3 = step.add %a3, %b3 : tensor<0x4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.add %[[A4]], %[[B4]] : tensor<?xi64>{{$}}
  %4 = step.add %a4, %b4 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @sub
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>, %[[A3:.+]]: tensor<0x4xi32>, %[[B3:.+]]: tensor<0x4xi32>, %[[A4:.+]]: tensor<?xi64>, %[[B4:.+]]: tensor<?xi64>)
func.func @sub(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.sub %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.sub %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.sub %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.sub %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.sub %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.sub %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.sub %[[A3]], %[[B3]] : tensor<0x4xi32>{{$}}
  %3 = step.sub %a3, %b3 : tensor<0x4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.sub %[[A4]], %[[B4]] : tensor<?xi64>{{$}}
  %4 = step.sub %a4, %b4 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @mul
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>, %[[A3:.+]]: tensor<0x4xi32>, %[[B3:.+]]: tensor<0x4xi32>, %[[A4:.+]]: tensor<?xi64>, %[[B4:.+]]: tensor<?xi64>)
func.func @mul(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.mul %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.mul %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.mul %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.mul %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.mul %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.mul %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.mul %[[A3]], %[[B3]] : tensor<0x4xi32>{{$}}
  %3 = step.mul %a3, %b3 : tensor<0x4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.mul %[[A4]], %[[B4]] : tensor<?xi64>{{$}}
  %4 = step.mul %a4, %b4 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @div
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>, %[[A3:.+]]: tensor<0x4xi32>, %[[B3:.+]]: tensor<0x4xi32>, %[[A4:.+]]: tensor<?xi64>, %[[B4:.+]]: tensor<?xi64>)
func.func @div(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.div %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.div %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.div %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.div %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.div %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.div %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.div %[[A3]], %[[B3]] : tensor<0x4xi32>{{$}}
  %3 = step.div %a3, %b3 : tensor<0x4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.div %[[A4]], %[[B4]] : tensor<?xi64>{{$}}
  %4 = step.div %a4, %b4 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @max
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>, %[[A3:.+]]: tensor<0x4xi32>, %[[B3:.+]]: tensor<0x4xi32>, %[[A4:.+]]: tensor<?xi64>, %[[B4:.+]]: tensor<?xi64>)
func.func @max(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.max %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.max %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.max %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.max %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.max %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.max %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.max %[[A3]], %[[B3]] : tensor<0x4xi32>{{$}}
  %3 = step.max %a3, %b3 : tensor<0x4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.max %[[A4]], %[[B4]] : tensor<?xi64>{{$}}
  %4 = step.max %a4, %b4 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @min
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>, %[[A3:.+]]: tensor<0x4xi32>, %[[B3:.+]]: tensor<0x4xi32>, %[[A4:.+]]: tensor<?xi64>, %[[B4:.+]]: tensor<?xi64>)
func.func @min(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>, %a3: tensor<0x4xi32>, %b3: tensor<0x4xi32>, %a4: tensor<?xi64>, %b4: tensor<?xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.min %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.min %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.min %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.min %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.min %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.min %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.min %[[A3]], %[[B3]] : tensor<0x4xi32>{{$}}
  %3 = step.min %a3, %b3 : tensor<0x4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.min %[[A4]], %[[B4]] : tensor<?xi64>{{$}}
  %4 = step.min %a4, %b4 : tensor<?xi64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>, tensor<0x4xi32>, tensor<?xi64>
}

// CHECK-LABEL: func.func @pow
// CHECK-SAME: (%[[A0:.+]]: tensor<2x3xf32>, %[[B0:.+]]: tensor<2x3xf32>, %[[A1:.+]]: tensor<?x3xf16>, %[[B1:.+]]: tensor<2x?xf16>, %[[A2:.+]]: tensor<bf16>, %[[B2:.+]]: tensor<bf16>)
func.func @pow(%a0: tensor<2x3xf32>, %b0: tensor<2x3xf32>, %a1: tensor<?x3xf16>, %b1: tensor<2x?xf16>, %a2: tensor<bf16>, %b2: tensor<bf16>)
    -> (tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.pow %[[A0]], %[[B0]] : tensor<2x3xf32>{{$}}
  %0 = step.pow %a0, %b0 : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.pow %[[A1]], %[[B1]] : tensor<?x3xf16>, tensor<2x?xf16>{{$}}
  %1 = step.pow %a1, %b1 : tensor<?x3xf16>, tensor<2x?xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.pow %[[A2]], %[[B2]] : tensor<bf16>{{$}}
  %2 = step.pow %a2, %b2 : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf16>, tensor<bf16>
}

//===----------------------------------------------------------------------===//
// step.gelu
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[F32:.+]]: tensor<8x?xf32>, %[[F16:.+]]: tensor<0xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @gelu(%f32: tensor<8x?xf32>, %f16: tensor<0xf16>, %bf16: tensor<bf16>)
    -> (tensor<8x?xf32>, tensor<8x?xf32>, tensor<0xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.gelu %[[F32]] approximate none : tensor<8x?xf32>{{$}}
  %0 = step.gelu %f32 approximate none : tensor<8x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.gelu %[[F32]] approximate tanh : tensor<8x?xf32>{{$}}
  %1 = step.gelu %f32 approximate tanh : tensor<8x?xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.gelu %[[F16]] approximate tanh : tensor<0xf16>{{$}}
  %2 = step.gelu %f16 approximate tanh : tensor<0xf16>
  // CHECK-NEXT: %[[R3:.+]] = step.gelu %[[BF16]] approximate none : tensor<bf16>{{$}}
  %3 = step.gelu %bf16 approximate none : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<8x?xf32>, tensor<8x?xf32>, tensor<0xf16>, tensor<bf16>
}

//===----------------------------------------------------------------------===//
// step.gelu_grad
//===----------------------------------------------------------------------===//

// A dynamic dim takes the other operand's static size (C2).
// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME: (%[[G:.+]]: tensor<8x?xf32>, %[[X:.+]]: tensor<?x3xf32>, %[[H:.+]]: tensor<bf16>)
func.func @gelu_grad(%g: tensor<8x?xf32>, %x: tensor<?x3xf32>, %h: tensor<bf16>)
    -> (tensor<8x3xf32>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.gelu_grad %[[G]], %[[X]] approximate tanh : tensor<8x?xf32>, tensor<?x3xf32>{{$}}
  %0 = step.gelu_grad %g, %x approximate tanh : tensor<8x?xf32>, tensor<?x3xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.gelu_grad %[[H]], %[[H]] approximate none : tensor<bf16>{{$}}
  %1 = step.gelu_grad %h, %h approximate none : tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]]
  return %0, %1 : tensor<8x3xf32>, tensor<bf16>
}

//===----------------------------------------------------------------------===//
// step.compare
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @compare_directions
// CHECK-SAME: (%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>)
func.func @compare_directions(%a: tensor<4xf32>, %b: tensor<4xf32>)
    -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  // CHECK-NEXT: %[[EQ:.+]] = step.compare eq, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %0 = step.compare eq, %a, %b : tensor<4xf32>
  // CHECK-NEXT: %[[NE:.+]] = step.compare ne, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %1 = step.compare ne, %a, %b : tensor<4xf32>
  // CHECK-NEXT: %[[LT:.+]] = step.compare lt, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %2 = step.compare lt, %a, %b : tensor<4xf32>
  // CHECK-NEXT: %[[LE:.+]] = step.compare le, %[[A]], %[[B]] : tensor<4xf32>{{$}}
  %3 = step.compare le, %a, %b : tensor<4xf32>
  // CHECK-NEXT: %[[GT:.+]] = step.compare gt, %[[B]], %[[A]] : tensor<4xf32>{{$}}
  %4 = step.compare gt, %b, %a : tensor<4xf32>
  // CHECK-NEXT: %[[GE:.+]] = step.compare ge, %[[B]], %[[A]] : tensor<4xf32>{{$}}
  %5 = step.compare ge, %b, %a : tensor<4xf32>
  // CHECK-NEXT: return %[[EQ]], %[[NE]], %[[LT]], %[[LE]], %[[GT]], %[[GE]]
  return %0, %1, %2, %3, %4, %5 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// The result is i1 of the joined shape, whatever the operands' element type.
// CHECK-LABEL: func.func @compare_element_types
// CHECK-SAME: (%[[F16:.+]]: tensor<?x3xf16>, %[[F16S:.+]]: tensor<2x3xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<0xi32>, %[[I64:.+]]: tensor<2x?xi64>, %[[I1:.+]]: tensor<5xi1>)
func.func @compare_element_types(%f16: tensor<?x3xf16>, %f16s: tensor<2x3xf16>, %bf16: tensor<bf16>,
                                 %i32: tensor<0xi32>, %i64: tensor<2x?xi64>, %i1: tensor<5xi1>)
    -> (tensor<2x3xi1>, tensor<i1>, tensor<0xi1>, tensor<2x?xi1>, tensor<5xi1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.compare lt, %[[F16]], %[[F16S]] : tensor<?x3xf16>, tensor<2x3xf16>{{$}}
  %0 = step.compare lt, %f16, %f16s : tensor<?x3xf16>, tensor<2x3xf16>
  // CHECK-NEXT: %[[R1:.+]] = step.compare ge, %[[BF16]], %[[BF16]] : tensor<bf16>{{$}}
  %1 = step.compare ge, %bf16, %bf16 : tensor<bf16>
  // CHECK-NEXT: %[[R2:.+]] = step.compare eq, %[[I32]], %[[I32]] : tensor<0xi32>{{$}}
  %2 = step.compare eq, %i32, %i32 : tensor<0xi32>
  // CHECK-NEXT: %[[R3:.+]] = step.compare gt, %[[I64]], %[[I64]] : tensor<2x?xi64>{{$}}
  %3 = step.compare gt, %i64, %i64 : tensor<2x?xi64>
  // CHECK-NEXT: %[[R4:.+]] = step.compare ne, %[[I1]], %[[I1]] : tensor<5xi1>{{$}}
  %4 = step.compare ne, %i1, %i1 : tensor<5xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]] : tensor<2x3xi1>, tensor<i1>, tensor<0xi1>, tensor<2x?xi1>, tensor<5xi1>
  return %0, %1, %2, %3, %4 : tensor<2x3xi1>, tensor<i1>, tensor<0xi1>, tensor<2x?xi1>, tensor<5xi1>
}

//===----------------------------------------------------------------------===//
// step.select
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[P:.+]]: tensor<4xi1>, %[[F32:.+]]: tensor<4xf32>, %[[F16:.+]]: tensor<4xf16>, %[[BF16:.+]]: tensor<4xbf16>, %[[I32:.+]]: tensor<4xi32>, %[[I64:.+]]: tensor<4xi64>, %[[I1:.+]]: tensor<4xi1>)
func.func @select(%p: tensor<4xi1>, %f32: tensor<4xf32>, %f16: tensor<4xf16>, %bf16: tensor<4xbf16>,
                  %i32: tensor<4xi32>, %i64: tensor<4xi64>, %i1: tensor<4xi1>)
    -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xi32>, tensor<4xi64>, tensor<4xi1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.select %[[P]], %[[F32]], %[[F32]] : tensor<4xi1>, tensor<4xf32>{{$}}
  %0 = step.select %p, %f32, %f32 : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.select %[[P]], %[[F16]], %[[F16]] : tensor<4xi1>, tensor<4xf16>{{$}}
  %1 = step.select %p, %f16, %f16 : tensor<4xi1>, tensor<4xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.select %[[P]], %[[BF16]], %[[BF16]] : tensor<4xi1>, tensor<4xbf16>{{$}}
  %2 = step.select %p, %bf16, %bf16 : tensor<4xi1>, tensor<4xbf16>
  // CHECK-NEXT: %[[R3:.+]] = step.select %[[P]], %[[I32]], %[[I32]] : tensor<4xi1>, tensor<4xi32>{{$}}
  %3 = step.select %p, %i32, %i32 : tensor<4xi1>, tensor<4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.select %[[P]], %[[I64]], %[[I64]] : tensor<4xi1>, tensor<4xi64>{{$}}
  %4 = step.select %p, %i64, %i64 : tensor<4xi1>, tensor<4xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.select %[[P]], %[[I1]], %[[P]] : tensor<4xi1>, tensor<4xi1>{{$}}
  %5 = step.select %p, %i1, %p : tensor<4xi1>, tensor<4xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xi32>, tensor<4xi64>, tensor<4xi1>
}

// Dynamic dims of the predicate and of either branch join to the static size.
// CHECK-LABEL: func.func @select_dynamic
// CHECK-SAME: (%[[P:.+]]: tensor<?x3xi1>, %[[A:.+]]: tensor<2x?xf32>, %[[B:.+]]: tensor<?x?xf32>, %[[PS:.+]]: tensor<i1>, %[[S:.+]]: tensor<f32>, %[[PZ:.+]]: tensor<0xi1>, %[[Z:.+]]: tensor<0xf32>)
func.func @select_dynamic(%p: tensor<?x3xi1>, %a: tensor<2x?xf32>, %b: tensor<?x?xf32>,
                          %ps: tensor<i1>, %s: tensor<f32>, %pz: tensor<0xi1>, %z: tensor<0xf32>)
    -> (tensor<2x3xf32>, tensor<f32>, tensor<0xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.select %[[P]], %[[A]], %[[B]] : tensor<?x3xi1>, tensor<2x?xf32>, tensor<?x?xf32>{{$}}
  %0 = step.select %p, %a, %b : tensor<?x3xi1>, tensor<2x?xf32>, tensor<?x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.select %[[PS]], %[[S]], %[[S]] : tensor<i1>, tensor<f32>{{$}}
  %1 = step.select %ps, %s, %s : tensor<i1>, tensor<f32>
  // CHECK-NEXT: %[[R2:.+]] = step.select %[[PZ]], %[[Z]], %[[Z]] : tensor<0xi1>, tensor<0xf32>{{$}}
  %2 = step.select %pz, %z, %z : tensor<0xi1>, tensor<0xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]] : tensor<2x3xf32>, tensor<f32>, tensor<0xf32>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<f32>, tensor<0xf32>
}

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cast_floats
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<0xf16>, %[[BF16:.+]]: tensor<bf16>)
func.func @cast_floats(%f32: tensor<4x?xf32>, %f16: tensor<0xf16>, %bf16: tensor<bf16>)
    -> (tensor<4x?xf16>, tensor<4x?xbf16>, tensor<0xf32>, tensor<0xbf16>, tensor<f32>, tensor<f16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.cast %[[F32]] : tensor<4x?xf32> -> tensor<4x?xf16>{{$}}
  %0 = step.cast %f32 : tensor<4x?xf32> -> tensor<4x?xf16>
  // CHECK-NEXT: %[[R1:.+]] = step.cast %[[F32]] : tensor<4x?xf32> -> tensor<4x?xbf16>{{$}}
  %1 = step.cast %f32 : tensor<4x?xf32> -> tensor<4x?xbf16>
  // CHECK-NEXT: %[[R2:.+]] = step.cast %[[F16]] : tensor<0xf16> -> tensor<0xf32>{{$}}
  %2 = step.cast %f16 : tensor<0xf16> -> tensor<0xf32>
  // CHECK-NEXT: %[[R3:.+]] = step.cast %[[F16]] : tensor<0xf16> -> tensor<0xbf16>{{$}}
  %3 = step.cast %f16 : tensor<0xf16> -> tensor<0xbf16>
  // CHECK-NEXT: %[[R4:.+]] = step.cast %[[BF16]] : tensor<bf16> -> tensor<f32>{{$}}
  %4 = step.cast %bf16 : tensor<bf16> -> tensor<f32>
  // CHECK-NEXT: %[[R5:.+]] = step.cast %[[BF16]] : tensor<bf16> -> tensor<f16>{{$}}
  %5 = step.cast %bf16 : tensor<bf16> -> tensor<f16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<4x?xf16>, tensor<4x?xbf16>, tensor<0xf32>, tensor<0xbf16>, tensor<f32>, tensor<f16>
}

// CHECK-LABEL: func.func @cast_integers_and_bools
// CHECK-SAME: (%[[F32:.+]]: tensor<2x3xf32>, %[[I32:.+]]: tensor<2x3xi32>, %[[I64:.+]]: tensor<2x3xi64>, %[[I1:.+]]: tensor<2x3xi1>)
func.func @cast_integers_and_bools(%f32: tensor<2x3xf32>, %i32: tensor<2x3xi32>, %i64: tensor<2x3xi64>, %i1: tensor<2x3xi1>)
    -> (tensor<2x3xi32>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xi32>, tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.cast %[[F32]] : tensor<2x3xf32> -> tensor<2x3xi32>{{$}}
  %0 = step.cast %f32 : tensor<2x3xf32> -> tensor<2x3xi32>
  // CHECK-NEXT: %[[R1:.+]] = step.cast %[[I32]] : tensor<2x3xi32> -> tensor<2x3xf32>{{$}}
  %1 = step.cast %i32 : tensor<2x3xi32> -> tensor<2x3xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.cast %[[I32]] : tensor<2x3xi32> -> tensor<2x3xi64>{{$}}
  %2 = step.cast %i32 : tensor<2x3xi32> -> tensor<2x3xi64>
  // CHECK-NEXT: %[[R3:.+]] = step.cast %[[I64]] : tensor<2x3xi64> -> tensor<2x3xi32>{{$}}
  %3 = step.cast %i64 : tensor<2x3xi64> -> tensor<2x3xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.cast %[[F32]] : tensor<2x3xf32> -> tensor<2x3xi1>{{$}}
  %4 = step.cast %f32 : tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK-NEXT: %[[R5:.+]] = step.cast %[[I1]] : tensor<2x3xi1> -> tensor<2x3xf32>{{$}}
  %5 = step.cast %i1 : tensor<2x3xi1> -> tensor<2x3xf32>
  // CHECK-NEXT: %[[R6:.+]] = step.cast %[[I1]] : tensor<2x3xi1> -> tensor<2x3xi64>{{$}}
  %6 = step.cast %i1 : tensor<2x3xi1> -> tensor<2x3xi64>
  // CHECK-NEXT: %[[R7:.+]] = step.cast %[[I64]] : tensor<2x3xi64> -> tensor<2x3xf32>{{$}}
  %7 = step.cast %i64 : tensor<2x3xi64> -> tensor<2x3xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]], %[[R6]], %[[R7]]
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2x3xi32>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xi32>, tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
}

// A cast to the operand's own type is valid IR (-canonicalize removes it).
// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:.+]]: tensor<?xf32>)
func.func @cast_same_type(%x: tensor<?xf32>) -> tensor<?xf32> {
  // CHECK-NEXT: %[[R:.+]] = step.cast %[[X]] : tensor<?xf32> -> tensor<?xf32>{{$}}
  %0 = step.cast %x : tensor<?xf32> -> tensor<?xf32>
  // CHECK-NEXT: return %[[R]]
  return %0 : tensor<?xf32>
}

//===----------------------------------------------------------------------===//
// step.constant
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @constant
func.func @constant() -> (tensor<2xf32>, tensor<2x2xf16>, tensor<3xbf16>, tensor<2xi32>, tensor<i64>,
                          tensor<2xi1>, tensor<0x3xf32>, tensor<f32>) {
  // CHECK-NEXT: %[[F32:.+]] = step.constant dense<[1.000000e+00, -2.500000e+00]> : tensor<2xf32>{{$}}
  %0 = step.constant dense<[1.0, -2.5]> : tensor<2xf32>
  // CHECK-NEXT: %[[F16:.+]] = step.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf16>{{$}}
  %1 = step.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf16>
  // CHECK-NEXT: %[[BF16:.+]] = step.constant dense<1.500000e+00> : tensor<3xbf16>{{$}}
  %2 = step.constant dense<1.5> : tensor<3xbf16>
  // CHECK-NEXT: %[[I32:.+]] = step.constant dense<[7, -8]> : tensor<2xi32>{{$}}
  %3 = step.constant dense<[7, -8]> : tensor<2xi32>
  // CHECK-NEXT: %[[I64:.+]] = step.constant dense<9223372036854775807> : tensor<i64>{{$}}
  %4 = step.constant dense<9223372036854775807> : tensor<i64>
  // CHECK-NEXT: %[[I1:.+]] = step.constant dense<[true, false]> : tensor<2xi1>{{$}}
  %5 = step.constant dense<[true, false]> : tensor<2xi1>
  // CHECK-NEXT: %[[EMPTY:.+]] = step.constant dense<> : tensor<0x3xf32>{{$}}
  %6 = step.constant dense<> : tensor<0x3xf32>
  // CHECK-NEXT: %[[SCALAR:.+]] = step.constant dense<0.000000e+00> : tensor<f32>{{$}}
  %7 = step.constant dense<0.0> : tensor<f32>
  // CHECK-NEXT: return %[[F32]], %[[F16]], %[[BF16]], %[[I32]], %[[I64]], %[[I1]], %[[EMPTY]], %[[SCALAR]]
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2xf32>, tensor<2x2xf16>, tensor<3xbf16>, tensor<2xi32>, tensor<i64>,
                                          tensor<2xi1>, tensor<0x3xf32>, tensor<f32>
}

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @broadcast_in_dim
// CHECK-SAME: (%[[B:.+]]: tensor<256xf32>, %[[ONES:.+]]: tensor<1x3xf16>, %[[S:.+]]: tensor<bf16>, %[[I:.+]]: tensor<4xi32>, %[[L:.+]]: tensor<?xi64>, %[[M:.+]]: tensor<2x1xi1>, %[[Z:.+]]: tensor<0xf32>)
func.func @broadcast_in_dim(%b: tensor<256xf32>, %ones: tensor<1x3xf16>, %s: tensor<bf16>, %i: tensor<4xi32>,
                            %l: tensor<?xi64>, %m: tensor<2x1xi1>, %z: tensor<0xf32>)
    -> (tensor<32x256xf32>, tensor<5x3xf16>, tensor<2x3xbf16>, tensor<4x2xi32>, tensor<?x7xi64>, tensor<2x6xi1>, tensor<3x0xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.broadcast_in_dim %[[B]], dims = [1] : tensor<256xf32> -> tensor<32x256xf32>{{$}}
  %0 = step.broadcast_in_dim %b, dims = [1] : tensor<256xf32> -> tensor<32x256xf32>
  // Size-1 dims repeat.
  // CHECK-NEXT: %[[R1:.+]] = step.broadcast_in_dim %[[ONES]], dims = [0, 1] : tensor<1x3xf16> -> tensor<5x3xf16>{{$}}
  %1 = step.broadcast_in_dim %ones, dims = [0, 1] : tensor<1x3xf16> -> tensor<5x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.broadcast_in_dim %[[S]], dims = [] : tensor<bf16> -> tensor<2x3xbf16>{{$}}
  %2 = step.broadcast_in_dim %s, dims = [] : tensor<bf16> -> tensor<2x3xbf16>
  // CHECK-NEXT: %[[R3:.+]] = step.broadcast_in_dim %[[I]], dims = [0] : tensor<4xi32> -> tensor<4x2xi32>{{$}}
  %3 = step.broadcast_in_dim %i, dims = [0] : tensor<4xi32> -> tensor<4x2xi32>
  // A dynamic result dim comes from a dynamic operand dim.
  // CHECK-NEXT: %[[R4:.+]] = step.broadcast_in_dim %[[L]], dims = [0] : tensor<?xi64> -> tensor<?x7xi64>{{$}}
  %4 = step.broadcast_in_dim %l, dims = [0] : tensor<?xi64> -> tensor<?x7xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.broadcast_in_dim %[[M]], dims = [0, 1] : tensor<2x1xi1> -> tensor<2x6xi1>{{$}}
  %5 = step.broadcast_in_dim %m, dims = [0, 1] : tensor<2x1xi1> -> tensor<2x6xi1>
  // CHECK-NEXT: %[[R6:.+]] = step.broadcast_in_dim %[[Z]], dims = [1] : tensor<0xf32> -> tensor<3x0xf32>{{$}}
  %6 = step.broadcast_in_dim %z, dims = [1] : tensor<0xf32> -> tensor<3x0xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]], %[[R6]]
  return %0, %1, %2, %3, %4, %5, %6 : tensor<32x256xf32>, tensor<5x3xf16>, tensor<2x3xbf16>, tensor<4x2xi32>, tensor<?x7xi64>, tensor<2x6xi1>, tensor<3x0xf32>
}

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[F32:.+]]: tensor<4x8xf32>, %[[F16:.+]]: tensor<?x8xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<0x4xi32>, %[[I64:.+]]: tensor<6xi64>, %[[I1:.+]]: tensor<2x2xi1>)
func.func @reshape(%f32: tensor<4x8xf32>, %f16: tensor<?x8xf16>, %bf16: tensor<bf16>, %i32: tensor<0x4xi32>,
                   %i64: tensor<6xi64>, %i1: tensor<2x2xi1>)
    -> (tensor<32xf32>, tensor<?x2x4xf16>, tensor<1x1xbf16>, tensor<2x0xi32>, tensor<2x3xi64>, tensor<4xi1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.reshape %[[F32]] : tensor<4x8xf32> -> tensor<32xf32>{{$}}
  %0 = step.reshape %f32 : tensor<4x8xf32> -> tensor<32xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.reshape %[[F16]] : tensor<?x8xf16> -> tensor<?x2x4xf16>{{$}}
  %1 = step.reshape %f16 : tensor<?x8xf16> -> tensor<?x2x4xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.reshape %[[BF16]] : tensor<bf16> -> tensor<1x1xbf16>{{$}}
  %2 = step.reshape %bf16 : tensor<bf16> -> tensor<1x1xbf16>
  // CHECK-NEXT: %[[R3:.+]] = step.reshape %[[I32]] : tensor<0x4xi32> -> tensor<2x0xi32>{{$}}
  %3 = step.reshape %i32 : tensor<0x4xi32> -> tensor<2x0xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.reshape %[[I64]] : tensor<6xi64> -> tensor<2x3xi64>{{$}}
  %4 = step.reshape %i64 : tensor<6xi64> -> tensor<2x3xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.reshape %[[I1]] : tensor<2x2xi1> -> tensor<4xi1>{{$}}
  %5 = step.reshape %i1 : tensor<2x2xi1> -> tensor<4xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<32xf32>, tensor<?x2x4xf16>, tensor<1x1xbf16>, tensor<2x0xi32>, tensor<2x3xi64>, tensor<4xi1>
}

// A dynamic operand may reshape to a static result (checked at run time).
// CHECK-LABEL: func.func @reshape_dynamic_to_static
// CHECK-SAME: (%[[X:.+]]: tensor<?x4xf32>)
func.func @reshape_dynamic_to_static(%x: tensor<?x4xf32>) -> tensor<2x2x2xf32> {
  // CHECK-NEXT: %[[R:.+]] = step.reshape %[[X]] : tensor<?x4xf32> -> tensor<2x2x2xf32>{{$}}
  %0 = step.reshape %x : tensor<?x4xf32> -> tensor<2x2x2xf32>
  // CHECK-NEXT: return %[[R]]
  return %0 : tensor<2x2x2xf32>
}

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[F32:.+]]: tensor<2x3xf32>, %[[F16:.+]]: tensor<2x3x4xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<?x5xi32>, %[[I64:.+]]: tensor<0x2xi64>, %[[I1:.+]]: tensor<7xi1>)
func.func @transpose(%f32: tensor<2x3xf32>, %f16: tensor<2x3x4xf16>, %bf16: tensor<bf16>, %i32: tensor<?x5xi32>,
                     %i64: tensor<0x2xi64>, %i1: tensor<7xi1>)
    -> (tensor<3x2xf32>, tensor<4x2x3xf16>, tensor<bf16>, tensor<5x?xi32>, tensor<2x0xi64>, tensor<7xi1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.transpose %[[F32]], perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>{{$}}
  %0 = step.transpose %f32, perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.transpose %[[F16]], perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>{{$}}
  %1 = step.transpose %f16, perm = [2, 0, 1] : tensor<2x3x4xf16> -> tensor<4x2x3xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.transpose %[[BF16]], perm = [] : tensor<bf16> -> tensor<bf16>{{$}}
  %2 = step.transpose %bf16, perm = [] : tensor<bf16> -> tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.transpose %[[I32]], perm = [1, 0] : tensor<?x5xi32> -> tensor<5x?xi32>{{$}}
  %3 = step.transpose %i32, perm = [1, 0] : tensor<?x5xi32> -> tensor<5x?xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.transpose %[[I64]], perm = [1, 0] : tensor<0x2xi64> -> tensor<2x0xi64>{{$}}
  %4 = step.transpose %i64, perm = [1, 0] : tensor<0x2xi64> -> tensor<2x0xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.transpose %[[I1]], perm = [0] : tensor<7xi1> -> tensor<7xi1>{{$}}
  %5 = step.transpose %i1, perm = [0] : tensor<7xi1> -> tensor<7xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<3x2xf32>, tensor<4x2x3xf16>, tensor<bf16>, tensor<5x?xi32>, tensor<2x0xi64>, tensor<7xi1>
}

//===----------------------------------------------------------------------===//
// step.slice
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[F32:.+]]: tensor<4x8xf32>, %[[F16:.+]]: tensor<?x6xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<10xi32>, %[[I64:.+]]: tensor<3xi64>, %[[I1:.+]]: tensor<5x5xi1>)
func.func @slice(%f32: tensor<4x8xf32>, %f16: tensor<?x6xf16>, %bf16: tensor<bf16>, %i32: tensor<10xi32>,
                 %i64: tensor<3xi64>, %i1: tensor<5x5xi1>)
    -> (tensor<4x3xf32>, tensor<2x6xf16>, tensor<bf16>, tensor<4xi32>, tensor<0xi64>, tensor<1x5xi1>) {
  // ceil((8 - 2) / 2) = 3.
  // CHECK-NEXT: %[[R0:.+]] = step.slice %[[F32]] start = [0, 2] limit = [4, 8] strides = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>{{$}}
  %0 = step.slice %f32 start = [0, 2] limit = [4, 8] strides = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
  // A dynamic dim is not bounds-checked; the result is static.
  // CHECK-NEXT: %[[R1:.+]] = step.slice %[[F16]] start = [1, 0] limit = [3, 6] strides = [1, 1] : tensor<?x6xf16> -> tensor<2x6xf16>{{$}}
  %1 = step.slice %f16 start = [1, 0] limit = [3, 6] strides = [1, 1] : tensor<?x6xf16> -> tensor<2x6xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.slice %[[BF16]] start = [] limit = [] strides = [] : tensor<bf16> -> tensor<bf16>{{$}}
  %2 = step.slice %bf16 start = [] limit = [] strides = [] : tensor<bf16> -> tensor<bf16>
  // Indices 0, 3, 6, 9: ceil(10 / 3) = 4.
  // CHECK-NEXT: %[[R3:.+]] = step.slice %[[I32]] start = [0] limit = [10] strides = [3] : tensor<10xi32> -> tensor<4xi32>{{$}}
  %3 = step.slice %i32 start = [0] limit = [10] strides = [3] : tensor<10xi32> -> tensor<4xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.slice %[[I64]] start = [2] limit = [2] strides = [1] : tensor<3xi64> -> tensor<0xi64>{{$}}
  %4 = step.slice %i64 start = [2] limit = [2] strides = [1] : tensor<3xi64> -> tensor<0xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.slice %[[I1]] start = [4, 0] limit = [5, 5] strides = [1, 1] : tensor<5x5xi1> -> tensor<1x5xi1>{{$}}
  %5 = step.slice %i1 start = [4, 0] limit = [5, 5] strides = [1, 1] : tensor<5x5xi1> -> tensor<1x5xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<4x3xf32>, tensor<2x6xf16>, tensor<bf16>, tensor<4xi32>, tensor<0xi64>, tensor<1x5xi1>
}

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<4x3xf32>, %[[H:.+]]: tensor<2x?xf16>, %[[HS:.+]]: tensor<?x5xf16>, %[[BF:.+]]: tensor<0x2xbf16>, %[[I:.+]]: tensor<3xi32>, %[[L:.+]]: tensor<1xi64>, %[[M:.+]]: tensor<0xi1>)
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %h: tensor<2x?xf16>, %hs: tensor<?x5xf16>,
                  %bf: tensor<0x2xbf16>, %i: tensor<3xi32>, %l: tensor<1xi64>, %m: tensor<0xi1>)
    -> (tensor<6x3xf32>, tensor<?x5xf16>, tensor<0x4xbf16>, tensor<9xi32>, tensor<1xi64>, tensor<0xi1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.concat %[[A]], %[[B]] dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<6x3xf32>{{$}}
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  // A dynamic size along dim makes the result dynamic; other dims join.
  // CHECK-NEXT: %[[R1:.+]] = step.concat %[[H]], %[[HS]] dim = 0 : tensor<2x?xf16>, tensor<?x5xf16> -> tensor<?x5xf16>{{$}}
  %1 = step.concat %h, %hs dim = 0 : tensor<2x?xf16>, tensor<?x5xf16> -> tensor<?x5xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.concat %[[BF]], %[[BF]] dim = 1 : tensor<0x2xbf16>, tensor<0x2xbf16> -> tensor<0x4xbf16>{{$}}
  %2 = step.concat %bf, %bf dim = 1 : tensor<0x2xbf16>, tensor<0x2xbf16> -> tensor<0x4xbf16>
  // CHECK-NEXT: %[[R3:.+]] = step.concat %[[I]], %[[I]], %[[I]] dim = 0 : tensor<3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<9xi32>{{$}}
  %3 = step.concat %i, %i, %i dim = 0 : tensor<3xi32>, tensor<3xi32>, tensor<3xi32> -> tensor<9xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.concat %[[L]] dim = 0 : tensor<1xi64> -> tensor<1xi64>{{$}}
  %4 = step.concat %l dim = 0 : tensor<1xi64> -> tensor<1xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.concat %[[M]], %[[M]] dim = 0 : tensor<0xi1>, tensor<0xi1> -> tensor<0xi1>{{$}}
  %5 = step.concat %m, %m dim = 0 : tensor<0xi1>, tensor<0xi1> -> tensor<0xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<6x3xf32>, tensor<?x5xf16>, tensor<0x4xbf16>, tensor<9xi32>, tensor<1xi64>, tensor<0xi1>
}

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @pad
// CHECK-SAME: (%[[F32:.+]]: tensor<2x3xf32>, %[[F16:.+]]: tensor<?x3xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<0xi32>, %[[I64:.+]]: tensor<2xi64>, %[[I1:.+]]: tensor<2xi1>)
func.func @pad(%f32: tensor<2x3xf32>, %f16: tensor<?x3xf16>, %bf16: tensor<bf16>, %i32: tensor<0xi32>,
               %i64: tensor<2xi64>, %i1: tensor<2xi1>)
    -> (tensor<4x4xf32>, tensor<?x5xf16>, tensor<bf16>, tensor<3xi32>, tensor<2xi64>, tensor<4xi1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.pad %[[F32]] low = [0, 1] high = [2, 0] value = 0.000000e+00 : tensor<2x3xf32> -> tensor<4x4xf32>{{$}}
  %0 = step.pad %f32 low = [0, 1] high = [2, 0] value = 0.0 : tensor<2x3xf32> -> tensor<4x4xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.pad %[[F16]] low = [1, 1] high = [1, 1] value = -6.550400e+04 : tensor<?x3xf16> -> tensor<?x5xf16>{{$}}
  %1 = step.pad %f16 low = [1, 1] high = [1, 1] value = -65504.0 : tensor<?x3xf16> -> tensor<?x5xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.pad %[[BF16]] low = [] high = [] value = 1.000000e+00 : tensor<bf16> -> tensor<bf16>{{$}}
  %2 = step.pad %bf16 low = [] high = [] value = 1.0 : tensor<bf16> -> tensor<bf16>
  // CHECK-NEXT: %[[R3:.+]] = step.pad %[[I32]] low = [1] high = [2] value = -1.000000e+00 : tensor<0xi32> -> tensor<3xi32>{{$}}
  %3 = step.pad %i32 low = [1] high = [2] value = -1.0 : tensor<0xi32> -> tensor<3xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.pad %[[I64]] low = [0] high = [0] value = 7.000000e+00 : tensor<2xi64> -> tensor<2xi64>{{$}}
  %4 = step.pad %i64 low = [0] high = [0] value = 7.0 : tensor<2xi64> -> tensor<2xi64>
  // CHECK-NEXT: %[[R5:.+]] = step.pad %[[I1]] low = [1] high = [1] value = 1.000000e+00 : tensor<2xi1> -> tensor<4xi1>{{$}}
  %5 = step.pad %i1 low = [1] high = [1] value = 1.0 : tensor<2xi1> -> tensor<4xi1>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<4x4xf32>, tensor<?x5xf16>, tensor<bf16>, tensor<3xi32>, tensor<2xi64>, tensor<4xi1>
}

//===----------------------------------------------------------------------===//
// step.iota
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @iota
func.func @iota() -> (tensor<8xi64>, tensor<4x8xi32>, tensor<4xf32>, tensor<2x3xf16>, tensor<0x5xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.iota dim = 0 : tensor<8xi64>{{$}}
  %0 = step.iota dim = 0 : tensor<8xi64>
  // CHECK-NEXT: %[[R1:.+]] = step.iota dim = 1 : tensor<4x8xi32>{{$}}
  %1 = step.iota dim = 1 : tensor<4x8xi32>
  // CHECK-NEXT: %[[R2:.+]] = step.iota dim = 0 : tensor<4xf32>{{$}}
  %2 = step.iota dim = 0 : tensor<4xf32>
  // CHECK-NEXT: %[[R3:.+]] = step.iota dim = 0 : tensor<2x3xf16>{{$}}
  %3 = step.iota dim = 0 : tensor<2x3xf16>
  // CHECK-NEXT: %[[R4:.+]] = step.iota dim = 1 : tensor<0x5xbf16>{{$}}
  %4 = step.iota dim = 1 : tensor<0x5xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]]
  return %0, %1, %2, %3, %4 : tensor<8xi64>, tensor<4x8xi32>, tensor<4xf32>, tensor<2x3xf16>, tensor<0x5xbf16>
}

// A symbolic dim (step-pad-dynamic) is dynamic and named.
// CHECK-LABEL: func.func @iota_symbolic
func.func @iota_symbolic() -> tensor<4x?xi64> {
  // CHECK-NEXT: step.iota dim = 1 {step.dims = ["", "T"]} : tensor<4x?xi64>{{$}}
  %0 = step.iota dim = 1 {step.dims = ["", "T"]} : tensor<4x?xi64>
  return %0 : tensor<4x?xi64>
}

//===----------------------------------------------------------------------===//
// step.reduce_sum, step.reduce_max, step.reduce_mean
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce_sum
// CHECK-SAME: (%[[F32:.+]]: tensor<4x8xf32>, %[[F16:.+]]: tensor<?x8x2xf16>, %[[BF16:.+]]: tensor<bf16>, %[[I32:.+]]: tensor<0x3xi32>, %[[I64:.+]]: tensor<5xi64>)
func.func @reduce_sum(%f32: tensor<4x8xf32>, %f16: tensor<?x8x2xf16>, %bf16: tensor<bf16>, %i32: tensor<0x3xi32>, %i64: tensor<5xi64>)
    -> (tensor<4xf32>, tensor<4x1xf32>, tensor<?xf16>, tensor<1x8x1xf16>, tensor<bf16>, tensor<3xi32>, tensor<i64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.reduce_sum %[[F32]] dims = [1] : tensor<4x8xf32> -> tensor<4xf32>{{$}}
  %0 = step.reduce_sum %f32 dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.reduce_sum %[[F32]] dims = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>{{$}}
  %1 = step.reduce_sum %f32 dims = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  // dims need not be sorted.
  // CHECK-NEXT: %[[R2:.+]] = step.reduce_sum %[[F16]] dims = [2, 1] : tensor<?x8x2xf16> -> tensor<?xf16>{{$}}
  %2 = step.reduce_sum %f16 dims = [2, 1] : tensor<?x8x2xf16> -> tensor<?xf16>
  // CHECK-NEXT: %[[R3:.+]] = step.reduce_sum %[[F16]] dims = [0, 2] keepdim : tensor<?x8x2xf16> -> tensor<1x8x1xf16>{{$}}
  %3 = step.reduce_sum %f16 dims = [0, 2] keepdim : tensor<?x8x2xf16> -> tensor<1x8x1xf16>
  // CHECK-NEXT: %[[R4:.+]] = step.reduce_sum %[[BF16]] dims = [] : tensor<bf16> -> tensor<bf16>{{$}}
  %4 = step.reduce_sum %bf16 dims = [] : tensor<bf16> -> tensor<bf16>
  // CHECK-NEXT: %[[R5:.+]] = step.reduce_sum %[[I32]] dims = [0] : tensor<0x3xi32> -> tensor<3xi32>{{$}}
  %5 = step.reduce_sum %i32 dims = [0] : tensor<0x3xi32> -> tensor<3xi32>
  // CHECK-NEXT: %[[R6:.+]] = step.reduce_sum %[[I64]] dims = [0] : tensor<5xi64> -> tensor<i64>{{$}}
  %6 = step.reduce_sum %i64 dims = [0] : tensor<5xi64> -> tensor<i64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]], %[[R6]]
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4x1xf32>, tensor<?xf16>, tensor<1x8x1xf16>, tensor<bf16>, tensor<3xi32>, tensor<i64>
}

// CHECK-LABEL: func.func @reduce_max
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[F16:.+]]: tensor<3xf16>, %[[BF16:.+]]: tensor<2x2xbf16>, %[[I32:.+]]: tensor<0x5xi32>, %[[I64:.+]]: tensor<i64>)
func.func @reduce_max(%f32: tensor<4x?xf32>, %f16: tensor<3xf16>, %bf16: tensor<2x2xbf16>, %i32: tensor<0x5xi32>, %i64: tensor<i64>)
    -> (tensor<4x1xf32>, tensor<f16>, tensor<1x1xbf16>, tensor<0xi32>, tensor<i64>) {
  // CHECK-NEXT: %[[R0:.+]] = step.reduce_max %[[F32]] dims = [1] keepdim : tensor<4x?xf32> -> tensor<4x1xf32>{{$}}
  %0 = step.reduce_max %f32 dims = [1] keepdim : tensor<4x?xf32> -> tensor<4x1xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.reduce_max %[[F16]] dims = [0] : tensor<3xf16> -> tensor<f16>{{$}}
  %1 = step.reduce_max %f16 dims = [0] : tensor<3xf16> -> tensor<f16>
  // CHECK-NEXT: %[[R2:.+]] = step.reduce_max %[[BF16]] dims = [0, 1] keepdim : tensor<2x2xbf16> -> tensor<1x1xbf16>{{$}}
  %2 = step.reduce_max %bf16 dims = [0, 1] keepdim : tensor<2x2xbf16> -> tensor<1x1xbf16>
  // CHECK-NEXT: %[[R3:.+]] = step.reduce_max %[[I32]] dims = [1] : tensor<0x5xi32> -> tensor<0xi32>{{$}}
  %3 = step.reduce_max %i32 dims = [1] : tensor<0x5xi32> -> tensor<0xi32>
  // CHECK-NEXT: %[[R4:.+]] = step.reduce_max %[[I64]] dims = [] keepdim : tensor<i64> -> tensor<i64>{{$}}
  %4 = step.reduce_max %i64 dims = [] keepdim : tensor<i64> -> tensor<i64>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]]
  return %0, %1, %2, %3, %4 : tensor<4x1xf32>, tensor<f16>, tensor<1x1xbf16>, tensor<0xi32>, tensor<i64>
}

// CHECK-LABEL: func.func @reduce_mean
// CHECK-SAME: (%[[F32:.+]]: tensor<4x8xf32>, %[[F16:.+]]: tensor<?x8xf16>, %[[BF16:.+]]: tensor<2x0xbf16>)
func.func @reduce_mean(%f32: tensor<4x8xf32>, %f16: tensor<?x8xf16>, %bf16: tensor<2x0xbf16>)
    -> (tensor<f32>, tensor<?x1xf16>, tensor<2xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.reduce_mean %[[F32]] dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>{{$}}
  %0 = step.reduce_mean %f32 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  // CHECK-NEXT: %[[R1:.+]] = step.reduce_mean %[[F16]] dims = [1] keepdim : tensor<?x8xf16> -> tensor<?x1xf16>{{$}}
  %1 = step.reduce_mean %f16 dims = [1] keepdim : tensor<?x8xf16> -> tensor<?x1xf16>
  // CHECK-NEXT: %[[R2:.+]] = step.reduce_mean %[[BF16]] dims = [1] : tensor<2x0xbf16> -> tensor<2xbf16>{{$}}
  %2 = step.reduce_mean %bf16 dims = [1] : tensor<2x0xbf16> -> tensor<2xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]]
  return %0, %1, %2 : tensor<f32>, tensor<?x1xf16>, tensor<2xbf16>
}

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @matmul_transposes
// CHECK-SAME: (%[[X:.+]]: tensor<32x784xf32>, %[[W:.+]]: tensor<784x256xf32>, %[[WT:.+]]: tensor<256x784xf32>, %[[XT:.+]]: tensor<784x32xf32>)
func.func @matmul_transposes(%x: tensor<32x784xf32>, %w: tensor<784x256xf32>, %wt: tensor<256x784xf32>, %xt: tensor<784x32xf32>)
    -> (tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.matmul %[[X]], %[[W]] : tensor<32x784xf32>, tensor<784x256xf32> -> tensor<32x256xf32>{{$}}
  %0 = step.matmul %x, %w : tensor<32x784xf32>, tensor<784x256xf32> -> tensor<32x256xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.matmul %[[X]], %[[WT]] transpose_b : tensor<32x784xf32>, tensor<256x784xf32> -> tensor<32x256xf32>{{$}}
  %1 = step.matmul %x, %wt transpose_b : tensor<32x784xf32>, tensor<256x784xf32> -> tensor<32x256xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.matmul %[[XT]], %[[W]] transpose_a : tensor<784x32xf32>, tensor<784x256xf32> -> tensor<32x256xf32>{{$}}
  %2 = step.matmul %xt, %w transpose_a : tensor<784x32xf32>, tensor<784x256xf32> -> tensor<32x256xf32>
  // CHECK-NEXT: %[[R3:.+]] = step.matmul %[[XT]], %[[WT]] transpose_a transpose_b : tensor<784x32xf32>, tensor<256x784xf32> -> tensor<32x256xf32>{{$}}
  %3 = step.matmul %xt, %wt transpose_a transpose_b : tensor<784x32xf32>, tensor<256x784xf32> -> tensor<32x256xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>, tensor<32x256xf32>
}

// CHECK-LABEL: func.func @matmul_batched
// CHECK-SAME: (%[[A:.+]]: tensor<2x4x3x8xf16>, %[[B:.+]]: tensor<2x4x8x5xf16>, %[[W:.+]]: tensor<5x8xf16>, %[[Q:.+]]: tensor<?x3x8xbf16>, %[[K:.+]]: tensor<?x?x8xbf16>)
func.func @matmul_batched(%a: tensor<2x4x3x8xf16>, %b: tensor<2x4x8x5xf16>, %w: tensor<5x8xf16>,
                          %q: tensor<?x3x8xbf16>, %k: tensor<?x?x8xbf16>)
    -> (tensor<2x4x3x5xf16>, tensor<2x4x3x5xf16>, tensor<?x3x?xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.matmul %[[A]], %[[B]] : tensor<2x4x3x8xf16>, tensor<2x4x8x5xf16> -> tensor<2x4x3x5xf16>{{$}}
  %0 = step.matmul %a, %b : tensor<2x4x3x8xf16>, tensor<2x4x8x5xf16> -> tensor<2x4x3x5xf16>
  // A rank-2 rhs is shared by every batch.
  // CHECK-NEXT: %[[R1:.+]] = step.matmul %[[A]], %[[W]] transpose_b : tensor<2x4x3x8xf16>, tensor<5x8xf16> -> tensor<2x4x3x5xf16>{{$}}
  %1 = step.matmul %a, %w transpose_b : tensor<2x4x3x8xf16>, tensor<5x8xf16> -> tensor<2x4x3x5xf16>
  // Dynamic batch and N dims.
  // CHECK-NEXT: %[[R2:.+]] = step.matmul %[[Q]], %[[K]] transpose_b : tensor<?x3x8xbf16>, tensor<?x?x8xbf16> -> tensor<?x3x?xbf16>{{$}}
  %2 = step.matmul %q, %k transpose_b : tensor<?x3x8xbf16>, tensor<?x?x8xbf16> -> tensor<?x3x?xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]]
  return %0, %1, %2 : tensor<2x4x3x5xf16>, tensor<2x4x3x5xf16>, tensor<?x3x?xbf16>
}

// CHECK-LABEL: func.func @matmul_zero_size
// CHECK-SAME: (%[[A:.+]]: tensor<0x4xf32>, %[[B:.+]]: tensor<4x3xf32>, %[[C:.+]]: tensor<2x0xf32>, %[[D:.+]]: tensor<0x5xf32>)
func.func @matmul_zero_size(%a: tensor<0x4xf32>, %b: tensor<4x3xf32>, %c: tensor<2x0xf32>, %d: tensor<0x5xf32>)
    -> (tensor<0x3xf32>, tensor<2x5xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.matmul %[[A]], %[[B]] : tensor<0x4xf32>, tensor<4x3xf32> -> tensor<0x3xf32>{{$}}
  %0 = step.matmul %a, %b : tensor<0x4xf32>, tensor<4x3xf32> -> tensor<0x3xf32>
  // K = 0: the result is all zeros, of a non-empty shape.
  // CHECK-NEXT: %[[R1:.+]] = step.matmul %[[C]], %[[D]] : tensor<2x0xf32>, tensor<0x5xf32> -> tensor<2x5xf32>{{$}}
  %1 = step.matmul %c, %d : tensor<2x0xf32>, tensor<0x5xf32> -> tensor<2x5xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]]
  return %0, %1 : tensor<0x3xf32>, tensor<2x5xf32>
}

//===----------------------------------------------------------------------===//
// step.softmax, step.log_softmax
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[F32:.+]]: tensor<4x10xf32>, %[[F16:.+]]: tensor<?x0xf16>, %[[BF16:.+]]: tensor<2x3x4xbf16>)
func.func @softmax(%f32: tensor<4x10xf32>, %f16: tensor<?x0xf16>, %bf16: tensor<2x3x4xbf16>)
    -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.softmax %[[F32]] dim = 1 : tensor<4x10xf32>{{$}}
  %0 = step.softmax %f32 dim = 1 : tensor<4x10xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.softmax %[[F32]] dim = 0 : tensor<4x10xf32>{{$}}
  %1 = step.softmax %f32 dim = 0 : tensor<4x10xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.softmax %[[F16]] dim = 0 : tensor<?x0xf16>{{$}}
  %2 = step.softmax %f16 dim = 0 : tensor<?x0xf16>
  // CHECK-NEXT: %[[R3:.+]] = step.softmax %[[BF16]] dim = 2 : tensor<2x3x4xbf16>{{$}}
  %3 = step.softmax %bf16 dim = 2 : tensor<2x3x4xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>
}

// CHECK-LABEL: func.func @log_softmax
// CHECK-SAME: (%[[F32:.+]]: tensor<4x10xf32>, %[[F16:.+]]: tensor<?x0xf16>, %[[BF16:.+]]: tensor<2x3x4xbf16>)
func.func @log_softmax(%f32: tensor<4x10xf32>, %f16: tensor<?x0xf16>, %bf16: tensor<2x3x4xbf16>)
    -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.log_softmax %[[F32]] dim = 1 : tensor<4x10xf32>{{$}}
  %0 = step.log_softmax %f32 dim = 1 : tensor<4x10xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.log_softmax %[[F32]] dim = 0 : tensor<4x10xf32>{{$}}
  %1 = step.log_softmax %f32 dim = 0 : tensor<4x10xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.log_softmax %[[F16]] dim = 1 : tensor<?x0xf16>{{$}}
  %2 = step.log_softmax %f16 dim = 1 : tensor<?x0xf16>
  // CHECK-NEXT: %[[R3:.+]] = step.log_softmax %[[BF16]] dim = 2 : tensor<2x3x4xbf16>{{$}}
  %3 = step.log_softmax %bf16 dim = 2 : tensor<2x3x4xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<?x0xf16>, tensor<2x3x4xbf16>
}

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[W:.+]]: tensor<8xf32>, %[[B:.+]]: tensor<8xf32>, %[[XH:.+]]: tensor<?x2x8xf16>, %[[WH:.+]]: tensor<2x8xf16>, %[[XB:.+]]: tensor<8xbf16>, %[[WB:.+]]: tensor<8xbf16>)
func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>,
                      %xh: tensor<?x2x8xf16>, %wh: tensor<2x8xf16>, %xb: tensor<8xbf16>, %wb: tensor<8xbf16>)
    -> (tensor<4x8xf32>, tensor<?x2x8xf16>, tensor<8xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.layer_norm %[[X]], %[[W]], %[[B]] eps = 1.000000e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>{{$}}
  %0 = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  // Normalizes over the trailing two dims.
  // CHECK-NEXT: %[[R1:.+]] = step.layer_norm %[[XH]], %[[WH]], %[[WH]] eps = 1.000000e-03 : tensor<?x2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>{{$}}
  %1 = step.layer_norm %xh, %wh, %wh eps = 1.0e-03 : tensor<?x2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>
  // rank(weight) == rank(operand).
  // CHECK-NEXT: %[[R2:.+]] = step.layer_norm %[[XB]], %[[WB]], %[[WB]] eps = 1.000000e-02 : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>{{$}}
  %2 = step.layer_norm %xb, %wb, %wb eps = 1.0e-02 : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]]
  return %0, %1, %2 : tensor<4x8xf32>, tensor<?x2x8xf16>, tensor<8xbf16>
}

//===----------------------------------------------------------------------===//
// step.embedding
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[TOK:.+]]: tensor<4x16xi32>, %[[WTE:.+]]: tensor<50257x768xf32>, %[[I64:.+]]: tensor<?xi64>, %[[WH:.+]]: tensor<10x4xf16>, %[[S:.+]]: tensor<i32>, %[[WB:.+]]: tensor<?x3xbf16>, %[[Z:.+]]: tensor<0xi64>)
func.func @embedding(%tok: tensor<4x16xi32>, %wte: tensor<50257x768xf32>, %i64: tensor<?xi64>, %wh: tensor<10x4xf16>,
                     %s: tensor<i32>, %wb: tensor<?x3xbf16>, %z: tensor<0xi64>)
    -> (tensor<4x16x768xf32>, tensor<?x4xf16>, tensor<3xbf16>, tensor<0x4xf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.embedding %[[TOK]], %[[WTE]] : tensor<4x16xi32>, tensor<50257x768xf32> -> tensor<4x16x768xf32>{{$}}
  %0 = step.embedding %tok, %wte : tensor<4x16xi32>, tensor<50257x768xf32> -> tensor<4x16x768xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.embedding %[[I64]], %[[WH]] : tensor<?xi64>, tensor<10x4xf16> -> tensor<?x4xf16>{{$}}
  %1 = step.embedding %i64, %wh : tensor<?xi64>, tensor<10x4xf16> -> tensor<?x4xf16>
  // A rank-0 index gives one row.
  // CHECK-NEXT: %[[R2:.+]] = step.embedding %[[S]], %[[WB]] : tensor<i32>, tensor<?x3xbf16> -> tensor<3xbf16>{{$}}
  %2 = step.embedding %s, %wb : tensor<i32>, tensor<?x3xbf16> -> tensor<3xbf16>
  // CHECK-NEXT: %[[R3:.+]] = step.embedding %[[Z]], %[[WH]] : tensor<0xi64>, tensor<10x4xf16> -> tensor<0x4xf16>{{$}}
  %3 = step.embedding %z, %wh : tensor<0xi64>, tensor<10x4xf16> -> tensor<0x4xf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<4x16x768xf32>, tensor<?x4xf16>, tensor<3xbf16>, tensor<0x4xf16>
}

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[L:.+]]: tensor<32x10xf32>, %[[Y:.+]]: tensor<32xi64>, %[[LH:.+]]: tensor<?x5xf16>, %[[YH:.+]]: tensor<?xi32>, %[[LB:.+]]: tensor<8x3xbf16>, %[[YB:.+]]: tensor<8xi32>)
func.func @cross_entropy(%l: tensor<32x10xf32>, %y: tensor<32xi64>, %lh: tensor<?x5xf16>, %yh: tensor<?xi32>,
                         %lb: tensor<8x3xbf16>, %yb: tensor<8xi32>)
    -> (tensor<f32>, tensor<f32>, tensor<32xf32>, tensor<f32>, tensor<?xf16>, tensor<bf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.cross_entropy %[[L]], %[[Y]] reduction = mean : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>{{$}}
  %0 = step.cross_entropy %l, %y reduction = mean : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
  // CHECK-NEXT: %[[R1:.+]] = step.cross_entropy %[[L]], %[[Y]] reduction = sum : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>{{$}}
  %1 = step.cross_entropy %l, %y reduction = sum : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
  // CHECK-NEXT: %[[R2:.+]] = step.cross_entropy %[[L]], %[[Y]] reduction = none : tensor<32x10xf32>, tensor<32xi64> -> tensor<32xf32>{{$}}
  %2 = step.cross_entropy %l, %y reduction = none : tensor<32x10xf32>, tensor<32xi64> -> tensor<32xf32>
  // CHECK-NEXT: %[[R3:.+]] = step.cross_entropy %[[L]], %[[Y]] reduction = mean ignore_index = 0 : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>{{$}}
  %3 = step.cross_entropy %l, %y reduction = mean ignore_index = 0 : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
  // CHECK-NEXT: %[[R4:.+]] = step.cross_entropy %[[LH]], %[[YH]] reduction = none ignore_index = -1 : tensor<?x5xf16>, tensor<?xi32> -> tensor<?xf16>{{$}}
  %4 = step.cross_entropy %lh, %yh reduction = none ignore_index = -1 : tensor<?x5xf16>, tensor<?xi32> -> tensor<?xf16>
  // An explicit ignore_index equal to the default is kept as written.
  // CHECK-NEXT: %[[R5:.+]] = step.cross_entropy %[[LB]], %[[YB]] reduction = sum ignore_index = -100 : tensor<8x3xbf16>, tensor<8xi32> -> tensor<bf16>{{$}}
  %5 = step.cross_entropy %lb, %yb reduction = sum ignore_index = -100 : tensor<8x3xbf16>, tensor<8xi32> -> tensor<bf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<f32>, tensor<f32>, tensor<32xf32>, tensor<f32>, tensor<?xf16>, tensor<bf16>
}

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[F32:.+]]: tensor<4x8xf32>, %[[F16:.+]]: tensor<?xf16>, %[[BF16:.+]]: tensor<bf16>, %[[Z:.+]]: tensor<0x2xf32>)
func.func @dropout(%f32: tensor<4x8xf32>, %f16: tensor<?xf16>, %bf16: tensor<bf16>, %z: tensor<0x2xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<?xf16>, tensor<bf16>, tensor<0x2xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.dropout %[[F32]] p = 1.000000e-01 seed = 42 : tensor<4x8xf32>{{$}}
  %0 = step.dropout %f32 p = 1.0e-01 seed = 42 : tensor<4x8xf32>
  // p = 0 is valid (-canonicalize removes the op).
  // CHECK-NEXT: %[[R1:.+]] = step.dropout %[[F32]] p = 0.000000e+00 seed = 0 : tensor<4x8xf32>{{$}}
  %1 = step.dropout %f32 p = 0.0 seed = 0 : tensor<4x8xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.dropout %[[F16]] p = 5.000000e-01 seed = -7 : tensor<?xf16>{{$}}
  %2 = step.dropout %f16 p = 0.5 seed = -7 : tensor<?xf16>
  // CHECK-NEXT: %[[R3:.+]] = step.dropout %[[BF16]] p = 9.000000e-01 seed = 9223372036854775807 : tensor<bf16>{{$}}
  %3 = step.dropout %bf16 p = 0.9 seed = 9223372036854775807 : tensor<bf16>
  // CHECK-NEXT: %[[R4:.+]] = step.dropout %[[Z]] p = 2.500000e-01 seed = 1 : tensor<0x2xf32>{{$}}
  %4 = step.dropout %z p = 0.25 seed = 1 : tensor<0x2xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]]
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<?xf16>, tensor<bf16>, tensor<0x2xf32>
}

// The step counter as the mask's offset (step-dropout-offset).
// CHECK-LABEL: func.func @dropout_offset
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[T:.+]]: tensor<i64>)
// CHECK-NEXT: step.dropout %[[X]] offset %[[T]] p = 1.000000e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>{{$}}
func.func @dropout_offset(%x: tensor<4x8xf32>, %t: tensor<i64>) -> tensor<4x8xf32> {
  %0 = step.dropout %x offset %t p = 1.0e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>
  return %0 : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x16x8xf32>, %[[K:.+]]: tensor<2x4x16x8xf32>, %[[V:.+]]: tensor<2x4x16x8xf32>)
func.func @attention(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.attention %[[Q]], %[[K]], %[[V]] : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>{{$}}
  %0 = step.attention %q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.attention %[[Q]], %[[K]], %[[V]] causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>{{$}}
  %1 = step.attention %q, %k, %v causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>{{$}}
  %2 = step.attention %q, %k, %v scale = 0.125 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  // CHECK-NEXT: %[[R3:.+]] = step.attention %[[Q]], %[[K]], %[[V]] causal scale = 5.000000e-01 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>{{$}}
  %3 = step.attention %q, %k, %v causal scale = 0.5 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

// Tq != Tk, Dv != D, rank 2, f16/bf16 and dynamic dims.
// CHECK-LABEL: func.func @attention_shapes
// CHECK-SAME: (%[[Q:.+]]: tensor<16x8xf16>, %[[K:.+]]: tensor<12x8xf16>, %[[V:.+]]: tensor<12x4xf16>, %[[QB:.+]]: tensor<?x3x8xbf16>, %[[KB:.+]]: tensor<?x?x8xbf16>, %[[VB:.+]]: tensor<?x5x?xbf16>)
func.func @attention_shapes(%q: tensor<16x8xf16>, %k: tensor<12x8xf16>, %v: tensor<12x4xf16>,
                            %qb: tensor<?x3x8xbf16>, %kb: tensor<?x?x8xbf16>, %vb: tensor<?x5x?xbf16>)
    -> (tensor<16x4xf16>, tensor<?x3x?xbf16>) {
  // CHECK-NEXT: %[[R0:.+]] = step.attention %[[Q]], %[[K]], %[[V]] causal : tensor<16x8xf16>, tensor<12x8xf16>, tensor<12x4xf16> -> tensor<16x4xf16>{{$}}
  %0 = step.attention %q, %k, %v causal : tensor<16x8xf16>, tensor<12x8xf16>, tensor<12x4xf16> -> tensor<16x4xf16>
  // CHECK-NEXT: %[[R1:.+]] = step.attention %[[QB]], %[[KB]], %[[VB]] : tensor<?x3x8xbf16>, tensor<?x?x8xbf16>, tensor<?x5x?xbf16> -> tensor<?x3x?xbf16>{{$}}
  %1 = step.attention %qb, %kb, %vb : tensor<?x3x8xbf16>, tensor<?x?x8xbf16>, tensor<?x5x?xbf16> -> tensor<?x3x?xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]]
  return %0, %1 : tensor<16x4xf16>, tensor<?x3x?xbf16>
}

// CHECK-LABEL: func.func @attention_grad
// CHECK-SAME: (%[[Q:.+]]: tensor<2x16x8xbf16>, %[[K:.+]]: tensor<2x12x8xbf16>, %[[V:.+]]: tensor<2x12x4xbf16>, %[[G:.+]]: tensor<2x16x4xbf16>)
func.func @attention_grad(%q: tensor<2x16x8xbf16>, %k: tensor<2x12x8xbf16>, %v: tensor<2x12x4xbf16>, %g: tensor<2x16x4xbf16>)
    -> (tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>, tensor<2x12x4xbf16>) {
  // CHECK-NEXT: %[[R0:[^ ]+]], %[[R1:[^ ]+]], %[[R2:[^ ]+]] = step.attention_grad %[[Q]], %[[K]], %[[V]], %[[G]] causal scale = 2.500000e-01 : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>, tensor<2x16x4xbf16> -> tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>{{$}}
  %0:3 = step.attention_grad %q, %k, %v, %g causal scale = 0.25 : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>, tensor<2x16x4xbf16> -> tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>
  // CHECK-NEXT: %{{[^ ]+}}, %{{[^ ]+}}, %[[S2:[^ ]+]] = step.attention_grad %[[Q]], %[[K]], %[[V]], %[[G]] : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>, tensor<2x16x4xbf16> -> tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>{{$}}
  %1:3 = step.attention_grad %q, %k, %v, %g : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>, tensor<2x16x4xbf16> -> tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[S2]] :
  return %0#0, %0#1, %0#2, %1#2 : tensor<2x16x8xbf16>, tensor<2x12x8xbf16>, tensor<2x12x4xbf16>, tensor<2x12x4xbf16>
}

// A valid length (rows and keys >= L are padding) round-trips on both ops.
// CHECK-LABEL: func.func @attention_valid
// CHECK-SAME: (%[[Q:.+]]: tensor<2x16x8xf32>, %[[G:.+]]: tensor<2x16x8xf32>, %[[L:.+]]: tensor<i64>)
func.func @attention_valid(%q: tensor<2x16x8xf32>, %g: tensor<2x16x8xf32>, %l: tensor<i64>)
    -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.attention %[[Q]], %[[Q]], %[[Q]] valid %[[L]] causal : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<i64> -> tensor<2x16x8xf32>{{$}}
  %0 = step.attention %q, %q, %q valid %l causal : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<i64> -> tensor<2x16x8xf32>
  // CHECK-NEXT: %[[R1:[^ ]+]], %{{[^ ]+}}, %{{[^ ]+}} = step.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[G]] valid %[[L]] scale = 5.000000e-01 : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<i64> -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>{{$}}
  %1:3 = step.attention_grad %q, %q, %q, %g valid %l scale = 0.5 : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<i64> -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]]
  return %0, %1#0 : tensor<2x16x8xf32>, tensor<2x16x8xf32>
}

// attention_lse: the result and each row's log-sum-exp (f32, q's shape
// without D); attention_grad reading them as `saved`.
// CHECK-LABEL: func.func @attention_lse
// CHECK-SAME: (%[[Q:.+]]: tensor<2x16x8xbf16>, %[[L:.+]]: tensor<i64>)
func.func @attention_lse(%q: tensor<2x16x8xbf16>, %l: tensor<i64>)
    -> (tensor<2x16xf32>, tensor<2x16x8xbf16>) {
  // CHECK-NEXT: %[[O:[^ ]+]], %[[LSE:[^ ]+]] = step.attention_lse %[[Q]], %[[Q]], %[[Q]] valid %[[L]] causal : tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<i64> -> tensor<2x16x8xbf16>, tensor<2x16xf32>{{$}}
  %o, %lse = step.attention_lse %q, %q, %q valid %l causal : tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<i64> -> tensor<2x16x8xbf16>, tensor<2x16xf32>
  // CHECK-NEXT: %[[D:[^ ]+]], %{{[^ ]+}}, %{{[^ ]+}} = step.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]] valid %[[L]] saved(%[[O]], %[[LSE]] : tensor<2x16x8xbf16>, tensor<2x16xf32>) causal : tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<i64> -> tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>{{$}}
  %d:3 = step.attention_grad %q, %q, %q, %o valid %l saved(%o, %lse : tensor<2x16x8xbf16>, tensor<2x16xf32>) causal : tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<i64> -> tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>
  // CHECK-NEXT: %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} = step.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]] saved(%[[O]], %[[LSE]] : tensor<2x16x8xbf16>, tensor<2x16xf32>) : tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16> -> tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>{{$}}
  %e:3 = step.attention_grad %q, %q, %q, %o saved(%o, %lse : tensor<2x16x8xbf16>, tensor<2x16xf32>) : tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16> -> tensor<2x16x8xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>
  // CHECK-NEXT: return %[[LSE]], %[[D]]
  return %lse, %d#0 : tensor<2x16xf32>, tensor<2x16x8xbf16>
}

// A dynamic dim joined with a static one takes the static size, for every op
// (as elementwise ops do).
// CHECK-LABEL: @dynamic_joins
func.func @dynamic_joins(%a: tensor<?x3x8xf32>, %b: tensor<2x8x4xf32>, %l: tensor<?x10xf32>, %t: tensor<4xi64>, %x: tensor<4x?xf32>, %w: tensor<8xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  // CHECK: step.matmul {{.*}} -> tensor<2x3x4xf32>
  %m = step.matmul %a, %b : tensor<?x3x8xf32>, tensor<2x8x4xf32> -> tensor<2x3x4xf32>
  // CHECK: step.cross_entropy {{.*}} -> tensor<4xf32>
  %c = step.cross_entropy %l, %t reduction = none : tensor<?x10xf32>, tensor<4xi64> -> tensor<4xf32>
  // CHECK: step.layer_norm {{.*}} : tensor<4x?xf32>, tensor<8xf32>, tensor<8xf32>
  %n = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x?xf32>, tensor<8xf32>, tensor<8xf32>
  %s = step.reshape %n : tensor<4x8xf32> -> tensor<4x8xf32>
  return %m, %c, %s : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// step.stop_gradient (every element type)
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @stop_gradient
// CHECK-SAME: (%[[F32:.+]]: tensor<4x?xf32>, %[[BF16:.+]]: tensor<bf16>, %[[I64:.+]]: tensor<0x3xi64>, %[[I1:.+]]: tensor<2xi1>)
func.func @stop_gradient(%f32: tensor<4x?xf32>, %bf16: tensor<bf16>, %i64: tensor<0x3xi64>, %i1: tensor<2xi1>)
    -> (tensor<4x?xf32>, tensor<bf16>, tensor<0x3xi64>, tensor<2xi1>, tensor<4x?xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.stop_gradient %[[F32]] : tensor<4x?xf32>{{$}}
  %0 = step.stop_gradient %f32 : tensor<4x?xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.stop_gradient %[[BF16]] : tensor<bf16>{{$}}
  %1 = step.stop_gradient %bf16 : tensor<bf16>
  // CHECK-NEXT: %[[R2:.+]] = step.stop_gradient %[[I64]] : tensor<0x3xi64>{{$}}
  %2 = step.stop_gradient %i64 : tensor<0x3xi64>
  // CHECK-NEXT: %[[R3:.+]] = step.stop_gradient %[[I1]] : tensor<2xi1>{{$}}
  %3 = step.stop_gradient %i1 : tensor<2xi1>
  // Generic form.
  // CHECK-NEXT: %[[R4:.+]] = step.stop_gradient %[[R0]] : tensor<4x?xf32>{{$}}
  %4 = "step.stop_gradient"(%0) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]]
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<bf16>, tensor<0x3xi64>, tensor<2xi1>, tensor<4x?xf32>
}

//===----------------------------------------------------------------------===//
// step.embedding_grad
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @embedding_grad
// CHECK-SAME: (%[[TOK:.+]]: tensor<4x16xi32>, %[[G:.+]]: tensor<4x16x768xf32>, %[[I:.+]]: tensor<i64>, %[[GB:.+]]: tensor<8xbf16>, %[[ID:.+]]: tensor<?x3xi64>, %[[GD:.+]]: tensor<?x3x?xf16>)
func.func @embedding_grad(%tok: tensor<4x16xi32>, %g: tensor<4x16x768xf32>, %i: tensor<i64>, %gb: tensor<8xbf16>,
                          %id: tensor<?x3xi64>, %gd: tensor<?x3x?xf16>)
    -> (tensor<50257x768xf32>, tensor<10x8xbf16>, tensor<7x?xf16>, tensor<5x768xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.embedding_grad %[[TOK]], %[[G]] num_embeddings = 50257 : tensor<4x16xi32>, tensor<4x16x768xf32> -> tensor<50257x768xf32>{{$}}
  %0 = step.embedding_grad %tok, %g num_embeddings = 50257 : tensor<4x16xi32>, tensor<4x16x768xf32> -> tensor<50257x768xf32>
  // A rank-0 index and a [D] grad.
  // CHECK-NEXT: %[[R1:.+]] = step.embedding_grad %[[I]], %[[GB]] num_embeddings = 10 : tensor<i64>, tensor<8xbf16> -> tensor<10x8xbf16>{{$}}
  %1 = step.embedding_grad %i, %gb num_embeddings = 10 : tensor<i64>, tensor<8xbf16> -> tensor<10x8xbf16>
  // Dynamic dims: D stays dynamic, V is static.
  // CHECK-NEXT: %[[R2:.+]] = step.embedding_grad %[[ID]], %[[GD]] num_embeddings = 7 : tensor<?x3xi64>, tensor<?x3x?xf16> -> tensor<7x?xf16>{{$}}
  %2 = step.embedding_grad %id, %gd num_embeddings = 7 : tensor<?x3xi64>, tensor<?x3x?xf16> -> tensor<7x?xf16>
  // Generic form.
  // CHECK-NEXT: %[[R3:.+]] = step.embedding_grad %[[TOK]], %[[G]] num_embeddings = 5 : tensor<4x16xi32>, tensor<4x16x768xf32> -> tensor<5x768xf32>{{$}}
  %3 = "step.embedding_grad"(%tok, %g) <{num_embeddings = 5 : i64}> : (tensor<4x16xi32>, tensor<4x16x768xf32>) -> tensor<5x768xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
  return %0, %1, %2, %3 : tensor<50257x768xf32>, tensor<10x8xbf16>, tensor<7x?xf16>, tensor<5x768xf32>
}

//===----------------------------------------------------------------------===//
// step.cross_entropy_grad
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK-SAME: (%[[L:.+]]: tensor<32x10xf32>, %[[Y:.+]]: tensor<32xi64>, %[[S:.+]]: tensor<f32>, %[[GN:.+]]: tensor<32xf32>, %[[LB:.+]]: tensor<?x5xbf16>, %[[YB:.+]]: tensor<?xi32>, %[[SB:.+]]: tensor<bf16>)
func.func @cross_entropy_grad(%l: tensor<32x10xf32>, %y: tensor<32xi64>, %s: tensor<f32>, %gn: tensor<32xf32>,
                              %lb: tensor<?x5xbf16>, %yb: tensor<?xi32>, %sb: tensor<bf16>)
    -> (tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x10xf32>, tensor<?x5xbf16>, tensor<32x10xf32>, tensor<32x10xf32>) {
  // CHECK-NEXT: %[[R0:.+]] = step.cross_entropy_grad %[[L]], %[[Y]], %[[S]] reduction = mean : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>{{$}}
  %0 = step.cross_entropy_grad %l, %y, %s reduction = mean : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.cross_entropy_grad %[[L]], %[[Y]], %[[S]] reduction = sum ignore_index = 0 : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>{{$}}
  %1 = step.cross_entropy_grad %l, %y, %s reduction = sum ignore_index = 0 : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>
  // CHECK-NEXT: %[[R2:.+]] = step.cross_entropy_grad %[[L]], %[[Y]], %[[GN]] reduction = none ignore_index = -1 : tensor<32x10xf32>, tensor<32xi64>, tensor<32xf32> -> tensor<32x10xf32>{{$}}
  %2 = step.cross_entropy_grad %l, %y, %gn reduction = none ignore_index = -1 : tensor<32x10xf32>, tensor<32xi64>, tensor<32xf32> -> tensor<32x10xf32>
  // CHECK-NEXT: %[[R3:.+]] = step.cross_entropy_grad %[[LB]], %[[YB]], %[[SB]] reduction = mean : tensor<?x5xbf16>, tensor<?xi32>, tensor<bf16> -> tensor<?x5xbf16>{{$}}
  %3 = step.cross_entropy_grad %lb, %yb, %sb reduction = mean : tensor<?x5xbf16>, tensor<?xi32>, tensor<bf16> -> tensor<?x5xbf16>
  // Generic form: reduction as its i32 value.
  // CHECK-NEXT: %[[R4:.+]] = step.cross_entropy_grad %[[L]], %[[Y]], %[[GN]] reduction = none : tensor<32x10xf32>, tensor<32xi64>, tensor<32xf32> -> tensor<32x10xf32>{{$}}
  %4 = "step.cross_entropy_grad"(%l, %y, %gn) <{reduction = 0 : i32}> : (tensor<32x10xf32>, tensor<32xi64>, tensor<32xf32>) -> tensor<32x10xf32>
  // CHECK-NEXT: %[[R5:.+]] = step.cross_entropy_grad %[[L]], %[[Y]], %[[S]] reduction = sum ignore_index = 3 : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>{{$}}
  %5 = "step.cross_entropy_grad"(%l, %y, %s) <{reduction = 2 : i32, ignore_index = 3 : i64}> : (tensor<32x10xf32>, tensor<32xi64>, tensor<f32>) -> tensor<32x10xf32>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5 : tensor<32x10xf32>, tensor<32x10xf32>, tensor<32x10xf32>, tensor<?x5xbf16>, tensor<32x10xf32>, tensor<32x10xf32>
}

//===----------------------------------------------------------------------===//
// step.check_finite
//===----------------------------------------------------------------------===//

// The result type is implied (tensor<i1>); operands may mix shapes and float
// types, including rank-0, zero-size and dynamic tensors.
// CHECK-LABEL: func.func @check_finite
// CHECK-SAME: (%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<2x3xbf16>, %[[C:.+]]: tensor<f16>, %[[D:.+]]: tensor<0x?xf32>)
func.func @check_finite(%a: tensor<4xf32>, %b: tensor<2x3xbf16>, %c: tensor<f16>, %d: tensor<0x?xf32>)
    -> (tensor<i1>, tensor<i1>, tensor<i1>) {
  // CHECK-NEXT: %[[R0:.+]] = step.check_finite %[[A]] : tensor<4xf32>{{$}}
  %0 = step.check_finite %a : tensor<4xf32>
  // CHECK-NEXT: %[[R1:.+]] = step.check_finite %[[A]], %[[B]], %[[C]], %[[D]] : tensor<4xf32>, tensor<2x3xbf16>, tensor<f16>, tensor<0x?xf32>{{$}}
  %1 = step.check_finite %a, %b, %c, %d : tensor<4xf32>, tensor<2x3xbf16>, tensor<f16>, tensor<0x?xf32>
  // An operand may repeat.
  // CHECK-NEXT: %[[R2:.+]] = step.check_finite %[[B]], %[[B]] : tensor<2x3xbf16>, tensor<2x3xbf16>{{$}}
  %2 = step.check_finite %b, %b : tensor<2x3xbf16>, tensor<2x3xbf16>
  // CHECK-NEXT: return %[[R0]], %[[R1]], %[[R2]]
  return %0, %1, %2 : tensor<i1>, tensor<i1>, tensor<i1>
}

//===----------------------------------------------------------------------===//
// step.sgd_update
//===----------------------------------------------------------------------===//

// Attributes equal to their default (0.0) are not printed.
// CHECK-LABEL: func.func @sgd_update
// CHECK-SAME: (%[[P:.+]]: tensor<8xf32>, %[[G:.+]]: tensor<8xf32>, %[[T:.+]]: tensor<i64>, %[[LR:.+]]: tensor<f32>, %[[B:.+]]: tensor<8xf32>, %[[PH:.+]]: tensor<2x3xbf16>)
func.func @sgd_update(%p: tensor<8xf32>, %g: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>, %b: tensor<8xf32>, %ph: tensor<2x3xbf16>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3xbf16>, tensor<8xf32>, tensor<8xf32>) {
  // CHECK-NEXT: %[[P0:[a-z_0-9]+]] = step.sgd_update %[[P]], %[[G]], %[[T]], %[[LR]] : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>{{$}}
  %0 = step.sgd_update %p, %g, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  // CHECK-NEXT: %[[P1:[a-z_0-9]+]], %[[B1:[a-z_0-9]+]] = step.sgd_update %[[P]], %[[G]], %[[T]], %[[LR]] momentum_buffer %[[B]] {dampening = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 5.000000e-04 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>){{$}}
  %1:2 = step.sgd_update %p, %g, %t, %lr momentum_buffer %b {momentum = 0.9 : f64, dampening = 0.1 : f64, weight_decay = 5.0e-4 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: %[[P2:[a-z_0-9]+]] = step.sgd_update %[[PH]], %[[PH]], %[[T]], %[[LR]] {weight_decay = 1.000000e-02 : f64} : (tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<i64>, tensor<f32>) -> tensor<2x3xbf16>{{$}}
  %2 = step.sgd_update %ph, %ph, %t, %lr {weight_decay = 0.01 : f64, momentum = 0.0 : f64} : (tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<i64>, tensor<f32>) -> tensor<2x3xbf16>
  // Generic form, nesterov as a unit attribute.
  // CHECK-NEXT: %[[P3:[a-z_0-9]+]], %[[B3:[a-z_0-9]+]] = step.sgd_update %[[P]], %[[G]], %[[T]], %[[LR]] momentum_buffer %[[B]] {momentum = 5.000000e-01 : f64, nesterov} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>){{$}}
  %3:2 = "step.sgd_update"(%p, %g, %t, %lr, %b) <{momentum = 0.5 : f64, nesterov}> : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: return %[[P0]], %[[P1]], %[[B1]], %[[P2]], %[[P3]], %[[B3]]
  return %0, %1#0, %1#1, %2, %3#0, %3#1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3xbf16>, tensor<8xf32>, tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// step.adamw_update, step.lamb_update
//===----------------------------------------------------------------------===//

// AdamW's defaults are PyTorch's (betas 0.9, 0.999, eps 1e-8, weight_decay
// 0.01); LAMB's eps default is 1e-6. Defaults are not printed.
// CHECK-LABEL: func.func @adam_like_update
// CHECK-SAME: (%[[P:.+]]: tensor<8xf32>, %[[G:.+]]: tensor<8xf32>, %[[M:.+]]: tensor<8xf32>, %[[V:.+]]: tensor<8xf32>, %[[T:.+]]: tensor<i64>, %[[LR:.+]]: tensor<f32>, %[[H:.+]]: tensor<?x4xf16>)
func.func @adam_like_update(%p: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>, %h: tensor<?x4xf16>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x4xf16>, tensor<8xf32>, tensor<8xf32>) {
  // CHECK-NEXT: %[[A0:[a-z_0-9]+]], %[[A1:[a-z_0-9]+]], %[[A2:[a-z_0-9]+]] = step.adamw_update %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : tensor<8xf32>, tensor<i64>, tensor<f32>{{$}}
  %a:3 = step.adamw_update %p, %g, %m, %v, %t, %lr : tensor<8xf32>, tensor<i64>, tensor<f32>
  // CHECK-NEXT: step.adamw_update %[[H]], %[[H]], %[[H]], %[[H]], %[[T]], %[[LR]] {beta1 = 8.000000e-01 : f64, beta2 = 7.500000e-01 : f64, eps = 9.9999999999999995E-7 : f64, weight_decay = 0.000000e+00 : f64} : tensor<?x4xf16>, tensor<i64>, tensor<f32>{{$}}
  %b:3 = step.adamw_update %h, %h, %h, %h, %t, %lr {beta1 = 0.8 : f64, beta2 = 0.75 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<?x4xf16>, tensor<i64>, tensor<f32>
  // CHECK-NEXT: %[[L0:[a-z_0-9]+]], %{{.+}} = step.lamb_update %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : tensor<8xf32>, tensor<i64>, tensor<f32>{{$}}
  %c:3 = step.lamb_update %p, %g, %m, %v, %t, %lr {eps = 1.0e-6 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  // Generic form.
  // CHECK-NEXT: %[[L1:[a-z_0-9]+]], %{{.+}} = step.lamb_update %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] {weight_decay = 0.000000e+00 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>{{$}}
  %d:3 = "step.lamb_update"(%p, %g, %m, %v, %t, %lr) <{weight_decay = 0.0 : f64}> : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: step.adamw_update %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] {beta2 = 5.000000e-01 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>{{$}}
  %e:3 = "step.adamw_update"(%p, %g, %m, %v, %t, %lr) <{beta2 = 0.5 : f64}> : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: return %[[A0]], %[[A1]], %[[A2]], %{{.+}}, %[[L0]], %[[L1]]
  return %a#0, %a#1, %a#2, %b#0, %c#0, %d#0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x4xf16>, tensor<8xf32>, tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// Memory placement: step.offload, step.reload
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @offload_reload
func.func @offload_reload(%x: tensor<4x8xbf16>, %i: tensor<3xi64>) -> (tensor<4x8xbf16>, tensor<3xi64>, tensor<3xi64>) {
  // CHECK-NEXT: %[[H:.+]] = step.offload %arg0 : tensor<4x8xbf16>{{$}}
  %h = step.offload %x : tensor<4x8xbf16>
  // CHECK-NEXT: %[[X:.+]] = step.reload %[[H]] : tensor<4x8xbf16>{{$}}
  %x2 = step.reload %h : tensor<4x8xbf16>
  // Generic form; a host value may be reloaded twice.
  // CHECK-NEXT: %[[G:.+]] = step.offload %arg1 : tensor<3xi64>{{$}}
  %g = "step.offload"(%i) : (tensor<3xi64>) -> tensor<3xi64>
  // CHECK-NEXT: %[[I1:.+]] = step.reload %[[G]] : tensor<3xi64>{{$}}
  %i1 = "step.reload"(%g) : (tensor<3xi64>) -> tensor<3xi64>
  // CHECK-NEXT: %[[I2:.+]] = step.reload %[[G]] : tensor<3xi64>{{$}}
  %i2 = step.reload %g : tensor<3xi64>
  // CHECK-NEXT: return %[[X]], %[[I1]], %[[I2]]
  return %x2, %i1, %i2 : tensor<4x8xbf16>, tensor<3xi64>, tensor<3xi64>
}

// Collectives: both forms, float and integer types, groups of the whole
// world and of pairs; local_shard pads 15 elements to 2 blocks of 8.
// CHECK-LABEL: func.func @collectives(
func.func @collectives(%x: tensor<4x3xbf16>, %n: tensor<2xi64>, %w: tensor<5x3xf32>)
    -> (tensor<4x3xbf16>, tensor<2xi64>, tensor<2x3xbf16>, tensor<4xi64>, tensor<8xf32>, tensor<4x3xbf16>) {
  // CHECK: step.all_reduce %{{.+}} {group_size = 4 : i64, reduce = "mean", replica_groups = array<i64: 0, 1, 2, 3>} : tensor<4x3xbf16> -> tensor<4x3xbf16>
  %a = step.all_reduce %x {group_size = 4 : i64, reduce = "mean", replica_groups = array<i64: 0, 1, 2, 3>} : tensor<4x3xbf16> -> tensor<4x3xbf16>
  // CHECK: step.all_reduce %{{.+}} {group_size = 2 : i64, reduce = "max", replica_groups = array<i64: 0, 2, 1, 3>} : tensor<2xi64> -> tensor<2xi64>
  %m = "step.all_reduce"(%n) {group_size = 2 : i64, reduce = "max", replica_groups = array<i64: 0, 2, 1, 3>} : (tensor<2xi64>) -> tensor<2xi64>
  // CHECK: step.reduce_scatter %{{.+}} {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>} : tensor<4x3xbf16> -> tensor<2x3xbf16>
  %s = step.reduce_scatter %x {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>} : tensor<4x3xbf16> -> tensor<2x3xbf16>
  // CHECK: step.all_gather %{{.+}} {group_size = 2 : i64, replica_groups = array<i64: 1, 0>} : tensor<2xi64> -> tensor<4xi64>
  %g = "step.all_gather"(%n) {group_size = 2 : i64, replica_groups = array<i64: 1, 0>} : (tensor<2xi64>) -> tensor<4xi64>
  // CHECK: step.local_shard %{{.+}} {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<5x3xf32> -> tensor<8xf32>
  %b = step.local_shard %w {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<5x3xf32> -> tensor<8xf32>
  // CHECK: step.all_gather %{{.+}} {group_size = 1 : i64, replica_groups = array<i64: 0>} : tensor<4x3xbf16> -> tensor<4x3xbf16>
  %one = step.all_gather %x {group_size = 1 : i64, replica_groups = array<i64: 0>} : tensor<4x3xbf16> -> tensor<4x3xbf16>
  return %a, %m, %s, %g, %b, %one : tensor<4x3xbf16>, tensor<2xi64>, tensor<2x3xbf16>, tensor<4xi64>, tensor<8xf32>, tensor<4x3xbf16>
}
