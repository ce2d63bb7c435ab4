// RUN: step-opt %s -canonicalize -split-input-file | FileCheck %s

// Folders of step ops. Each positive case is followed by the cases that must
// NOT fold, whose CHECK lines show the op still there.

//===----------------------------------------------------------------------===//
// step.add
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @add_zero_rhs
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @add_zero_rhs(%x: tensor<3xf32>) -> tensor<3xf32> {
  %zero = step.constant dense<0.0> : tensor<3xf32>
  %0 = step.add %x, %zero : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @add_zero_lhs
// CHECK-SAME: (%[[X:.+]]: tensor<2x2xbf16>)
// CHECK-NEXT: return %[[X]]
func.func @add_zero_lhs(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %zero = step.constant dense<0.0> : tensor<2x2xbf16>
  %0 = step.add %zero, %x : tensor<2x2xbf16>
  return %0 : tensor<2x2xbf16>
}

// -----

// x + (-0.0) == x for every x, -0.0 included.
// CHECK-LABEL: func.func @add_negative_zero
// CHECK-SAME: (%[[X:.+]]: tensor<3xf16>)
// CHECK-NEXT: return %[[X]]
func.func @add_negative_zero(%x: tensor<3xf16>) -> tensor<3xf16> {
  %zero = step.constant dense<-0.0> : tensor<3xf16>
  %0 = step.add %x, %zero : tensor<3xf16>
  return %0 : tensor<3xf16>
}

// -----

// CHECK-LABEL: func.func @add_zero_integer
// CHECK-SAME: (%[[X:.+]]: tensor<4xi32>)
// CHECK-NEXT: return %[[X]]
func.func @add_zero_integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  %zero = step.constant dense<0> : tensor<4xi32>
  %0 = step.add %x, %zero : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// CHECK-LABEL: func.func @add_nonzero_splat
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK-DAG: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK: %[[R:.+]] = step.add %[[X]], %[[ONE]] : tensor<3xf32>
// CHECK-NEXT: return %[[R]]
func.func @add_nonzero_splat(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = step.constant dense<1.0> : tensor<3xf32>
  %0 = step.add %x, %one : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @add_zero_not_splat
// CHECK-SAME: (%[[X:.+]]: tensor<2xf32>)
// CHECK-DAG: %[[C:.+]] = step.constant dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK: %[[R:.+]] = step.add %[[X]], %[[C]] : tensor<2xf32>
// CHECK-NEXT: return %[[R]]
func.func @add_zero_not_splat(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = step.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %0 = step.add %x, %c : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// The result (tensor<3xf32>) is more static than %x: folding would change
// the type.
// CHECK-LABEL: func.func @add_zero_refines_type
// CHECK-SAME: (%[[X:.+]]: tensor<?xf32>)
// CHECK-DAG: %[[ZERO:.+]] = step.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: %[[R:.+]] = step.add %[[X]], %[[ZERO]] : tensor<?xf32>, tensor<3xf32>
// CHECK-NEXT: return %[[R]]
func.func @add_zero_refines_type(%x: tensor<?xf32>) -> tensor<3xf32> {
  %zero = step.constant dense<0.0> : tensor<3xf32>
  %0 = step.add %x, %zero : tensor<?xf32>, tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.sub
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @sub_zero
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @sub_zero(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %zero = step.constant dense<0.0> : tensor<2x3xf32>
  %0 = step.sub %x, %zero : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @sub_zero_integer
// CHECK-SAME: (%[[X:.+]]: tensor<i64>)
// CHECK-NEXT: return %[[X]]
func.func @sub_zero_integer(%x: tensor<i64>) -> tensor<i64> {
  %zero = step.constant dense<0> : tensor<i64>
  %0 = step.sub %x, %zero : tensor<i64>
  return %0 : tensor<i64>
}

// -----

// 0 - x is -x, not x.
// CHECK-LABEL: func.func @sub_from_zero
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK-DAG: %[[ZERO:.+]] = step.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: %[[R:.+]] = step.sub %[[ZERO]], %[[X]] : tensor<3xf32>
// CHECK-NEXT: return %[[R]]
func.func @sub_from_zero(%x: tensor<3xf32>) -> tensor<3xf32> {
  %zero = step.constant dense<0.0> : tensor<3xf32>
  %0 = step.sub %zero, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.mul
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @mul_one_rhs
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @mul_one_rhs(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = step.constant dense<1.0> : tensor<4xf32>
  %0 = step.mul %x, %one : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @mul_one_lhs
// CHECK-SAME: (%[[X:.+]]: tensor<2x2xi64>)
// CHECK-NEXT: return %[[X]]
func.func @mul_one_lhs(%x: tensor<2x2xi64>) -> tensor<2x2xi64> {
  %one = step.constant dense<1> : tensor<2x2xi64>
  %0 = step.mul %one, %x : tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// x * 0 is not 0 for x = NaN, inf or -x.
// CHECK-LABEL: func.func @mul_zero
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-DAG: %[[ZERO:.+]] = step.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[R:.+]] = step.mul %[[X]], %[[ZERO]] : tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @mul_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = step.constant dense<0.0> : tensor<4xf32>
  %0 = step.mul %x, %zero : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @mul_minus_one
// CHECK-SAME: (%[[X:.+]]: tensor<4xi32>)
// CHECK-DAG: %[[M:.+]] = step.constant dense<-1> : tensor<4xi32>
// CHECK: %[[R:.+]] = step.mul %[[X]], %[[M]] : tensor<4xi32>
// CHECK-NEXT: return %[[R]]
func.func @mul_minus_one(%x: tensor<4xi32>) -> tensor<4xi32> {
  %m = step.constant dense<-1> : tensor<4xi32>
  %0 = step.mul %x, %m : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.div
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @div_one
// CHECK-SAME: (%[[X:.+]]: tensor<3xf16>)
// CHECK-NEXT: return %[[X]]
func.func @div_one(%x: tensor<3xf16>) -> tensor<3xf16> {
  %one = step.constant dense<1.0> : tensor<3xf16>
  %0 = step.div %x, %one : tensor<3xf16>
  return %0 : tensor<3xf16>
}

// -----

// CHECK-LABEL: func.func @div_one_integer
// CHECK-SAME: (%[[X:.+]]: tensor<3xi32>)
// CHECK-NEXT: return %[[X]]
func.func @div_one_integer(%x: tensor<3xi32>) -> tensor<3xi32> {
  %one = step.constant dense<1> : tensor<3xi32>
  %0 = step.div %x, %one : tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// 1 / x is the reciprocal, not x.
// CHECK-LABEL: func.func @div_one_by_x
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>)
// CHECK-DAG: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK: %[[R:.+]] = step.div %[[ONE]], %[[X]] : tensor<3xf32>
// CHECK-NEXT: return %[[R]]
func.func @div_one_by_x(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = step.constant dense<1.0> : tensor<3xf32>
  %0 = step.div %one, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.neg
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:.+]]: tensor<2x?xf32>)
// CHECK-NEXT: return %[[X]]
func.func @neg_neg(%x: tensor<2x?xf32>) -> tensor<2x?xf32> {
  %0 = step.neg %x : tensor<2x?xf32>
  %1 = step.neg %0 : tensor<2x?xf32>
  return %1 : tensor<2x?xf32>
}

// -----

// CHECK-LABEL: func.func @neg_neg_neg
// CHECK-SAME: (%[[X:.+]]: tensor<4xi32>)
// CHECK-NEXT: %[[R:.+]] = step.neg %[[X]] : tensor<4xi32>
// CHECK-NEXT: return %[[R]]
func.func @neg_neg_neg(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = step.neg %x : tensor<4xi32>
  %1 = step.neg %0 : tensor<4xi32>
  %2 = step.neg %1 : tensor<4xi32>
  return %2 : tensor<4xi32>
}

// -----

// CHECK-LABEL: func.func @neg_abs
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[A:.+]] = step.abs %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[R:.+]] = step.neg %[[A]] : tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @neg_abs(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = step.abs %x : tensor<4xf32>
  %1 = step.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:.+]]: tensor<?x4xbf16>)
// CHECK-NEXT: return %[[X]]
func.func @cast_same_type(%x: tensor<?x4xbf16>) -> tensor<?x4xbf16> {
  %0 = step.cast %x : tensor<?x4xbf16> -> tensor<?x4xbf16>
  return %0 : tensor<?x4xbf16>
}

// -----

// bf16 -> f32 is exact, so bf16 -> f32 -> f16 rounds once, like bf16 -> f16.
// CHECK-LABEL: func.func @cast_of_widening_cast
// CHECK-SAME: (%[[X:.+]]: tensor<4xbf16>)
// CHECK-NEXT: %[[R:.+]] = step.cast %[[X]] : tensor<4xbf16> -> tensor<4xf16>
// CHECK-NEXT: return %[[R]]
func.func @cast_of_widening_cast(%x: tensor<4xbf16>) -> tensor<4xf16> {
  %0 = step.cast %x : tensor<4xbf16> -> tensor<4xf32>
  %1 = step.cast %0 : tensor<4xf32> -> tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// CHECK-LABEL: func.func @cast_widening_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>)
// CHECK-NEXT: return %[[X]]
func.func @cast_widening_round_trip(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = step.cast %x : tensor<4xf16> -> tensor<4xf32>
  %1 = step.cast %0 : tensor<4xf32> -> tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// i32 -> i64 is exact: i32 -> i64 -> f32 rounds once, like i32 -> f32.
// CHECK-LABEL: func.func @cast_of_integer_widening
// CHECK-SAME: (%[[X:.+]]: tensor<4xi32>)
// CHECK-NEXT: %[[R:.+]] = step.cast %[[X]] : tensor<4xi32> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @cast_of_integer_widening(%x: tensor<4xi32>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xi32> -> tensor<4xi64>
  %1 = step.cast %0 : tensor<4xi64> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// i1 -> x is 0/1, exact in every type.
// CHECK-LABEL: func.func @cast_of_bool_cast
// CHECK-SAME: (%[[X:.+]]: tensor<4xi1>)
// CHECK-NEXT: %[[R:.+]] = step.cast %[[X]] : tensor<4xi1> -> tensor<4xi32>
// CHECK-NEXT: return %[[R]]
func.func @cast_of_bool_cast(%x: tensor<4xi1>) -> tensor<4xi32> {
  %0 = step.cast %x : tensor<4xi1> -> tensor<4xbf16>
  %1 = step.cast %0 : tensor<4xbf16> -> tensor<4xi32>
  return %1 : tensor<4xi32>
}

// -----

// f32 -> bf16 rounds: the chain is not the identity.
// CHECK-LABEL: func.func @cast_narrowing_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[H:.+]] = step.cast %[[X]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT: %[[R:.+]] = step.cast %[[H]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @cast_narrowing_round_trip(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %1 = step.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f16 -> bf16 loses mantissa bits (and range): no fold to f16 -> f32.
// CHECK-LABEL: func.func @cast_of_lossy_float_cast
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>)
// CHECK-NEXT: %[[H:.+]] = step.cast %[[X]] : tensor<4xf16> -> tensor<4xbf16>
// CHECK-NEXT: %[[R:.+]] = step.cast %[[H]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @cast_of_lossy_float_cast(%x: tensor<4xf16>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xf16> -> tensor<4xbf16>
  %1 = step.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f32 -> i32 truncates.
// CHECK-LABEL: func.func @cast_float_int_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[I:.+]] = step.cast %[[X]] : tensor<4xf32> -> tensor<4xi32>
// CHECK-NEXT: %[[R:.+]] = step.cast %[[I]] : tensor<4xi32> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @cast_float_int_round_trip(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xf32> -> tensor<4xi32>
  %1 = step.cast %0 : tensor<4xi32> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// i32 -> f32 rounds above 2^24.
// CHECK-LABEL: func.func @cast_int_float_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<4xi32>)
// CHECK-NEXT: %[[F:.+]] = step.cast %[[X]] : tensor<4xi32> -> tensor<4xf32>
// CHECK-NEXT: %[[R:.+]] = step.cast %[[F]] : tensor<4xf32> -> tensor<4xi32>
// CHECK-NEXT: return %[[R]]
func.func @cast_int_float_round_trip(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = step.cast %x : tensor<4xi32> -> tensor<4xf32>
  %1 = step.cast %0 : tensor<4xf32> -> tensor<4xi32>
  return %1 : tensor<4xi32>
}

// -----

// i64 -> i32 wraps.
// CHECK-LABEL: func.func @cast_integer_narrowing_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<4xi64>)
// CHECK-NEXT: %[[N:.+]] = step.cast %[[X]] : tensor<4xi64> -> tensor<4xi32>
// CHECK-NEXT: %[[R:.+]] = step.cast %[[N]] : tensor<4xi32> -> tensor<4xi64>
// CHECK-NEXT: return %[[R]]
func.func @cast_integer_narrowing_round_trip(%x: tensor<4xi64>) -> tensor<4xi64> {
  %0 = step.cast %x : tensor<4xi64> -> tensor<4xi32>
  %1 = step.cast %0 : tensor<4xi32> -> tensor<4xi64>
  return %1 : tensor<4xi64>
}

// -----

// x -> i1 is x != 0: i1 -> ... is exact but f32 -> i1 is not.
// CHECK-LABEL: func.func @cast_to_bool_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[B:.+]] = step.cast %[[X]] : tensor<4xf32> -> tensor<4xi1>
// CHECK-NEXT: %[[R:.+]] = step.cast %[[B]] : tensor<4xi1> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @cast_to_bool_round_trip(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = step.cast %x : tensor<4xf32> -> tensor<4xi1>
  %1 = step.cast %0 : tensor<4xi1> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape_same_type
// CHECK-SAME: (%[[X:.+]]: tensor<?x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_same_type(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = step.reshape %x : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.+]]: tensor<2x6xf32>)
// CHECK-NEXT: %[[R:.+]] = step.reshape %[[X]] : tensor<2x6xf32> -> tensor<3x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
  %0 = step.reshape %x : tensor<2x6xf32> -> tensor<12xf32>
  %1 = step.reshape %0 : tensor<12xf32> -> tensor<3x4xf32>
  return %1 : tensor<3x4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape_dynamic
// CHECK-SAME: (%[[X:.+]]: tensor<?x4xi64>)
// CHECK-NEXT: %[[R:.+]] = step.reshape %[[X]] : tensor<?x4xi64> -> tensor<?x2xi64>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape_dynamic(%x: tensor<?x4xi64>) -> tensor<?x2xi64> {
  %0 = step.reshape %x : tensor<?x4xi64> -> tensor<?xi64>
  %1 = step.reshape %0 : tensor<?xi64> -> tensor<?x2xi64>
  return %1 : tensor<?x2xi64>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape_identity
// CHECK-SAME: (%[[X:.+]]: tensor<2x6xi1>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_of_reshape_identity(%x: tensor<2x6xi1>) -> tensor<2x6xi1> {
  %0 = step.reshape %x : tensor<2x6xi1> -> tensor<12xi1>
  %1 = step.reshape %0 : tensor<12xi1> -> tensor<2x6xi1>
  return %1 : tensor<2x6xi1>
}

// -----

// Row-major order is kept.
// CHECK-LABEL: func.func @reshape_of_constant
// CHECK-NEXT: %[[C:.+]] = step.constant dense<{{\[}}[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
// CHECK-NEXT: return %[[C]]
func.func @reshape_of_constant() -> tensor<2x3xi32> {
  %c = step.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi32>
  %0 = step.reshape %c : tensor<6xi32> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// CHECK-LABEL: func.func @reshape_not_foldable
// CHECK-SAME: (%[[X:.+]]: tensor<2x6xf32>)
// CHECK-NEXT: %[[R:.+]] = step.reshape %[[X]] : tensor<2x6xf32> -> tensor<6x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_not_foldable(%x: tensor<2x6xf32>) -> tensor<6x2xf32> {
  %0 = step.reshape %x : tensor<2x6xf32> -> tensor<6x2xf32>
  return %0 : tensor<6x2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = step.transpose %x, perm = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// result[i] = inner[perm[i]] = x[innerPerm[perm[i]]]: with innerPerm =
// [2, 0, 1] and perm = [2, 0, 1], the composed perm is [innerPerm[2],
// innerPerm[0], innerPerm[1]] = [1, 2, 0] (2x3x4 -> 4x2x3 -> 3x4x2).
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.+]] = step.transpose %[[X]], perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = step.transpose %x, perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = step.transpose %0, perm = [2, 0, 1] : tensor<4x2x3xf32> -> tensor<3x4x2xf32>
  return %1 : tensor<3x4x2xf32>
}

// -----

// Non-commuting perms: innerPerm = [1, 0, 2], perm = [0, 2, 1] compose to
// [innerPerm[0], innerPerm[2], innerPerm[1]] = [1, 2, 0]; the other order
// would give [2, 0, 1] (2x3x4 -> 3x2x4 -> 3x4x2).
// CHECK-LABEL: func.func @transpose_of_transpose_order
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xi32>)
// CHECK-NEXT: %[[R:.+]] = step.transpose %[[X]], perm = [1, 2, 0] : tensor<2x3x4xi32> -> tensor<3x4x2xi32>
// CHECK-NEXT: return %[[R]]
func.func @transpose_of_transpose_order(%x: tensor<2x3x4xi32>) -> tensor<3x4x2xi32> {
  %0 = step.transpose %x, perm = [1, 0, 2] : tensor<2x3x4xi32> -> tensor<3x2x4xi32>
  %1 = step.transpose %0, perm = [0, 2, 1] : tensor<3x2x4xi32> -> tensor<3x4x2xi32>
  return %1 : tensor<3x4x2xi32>
}

// -----

// [1, 2, 0] then [2, 0, 1] compose to the identity.
// CHECK-LABEL: func.func @transpose_of_inverse_transpose
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_of_inverse_transpose(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = step.transpose %x, perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = step.transpose %0, perm = [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// A transpose of a square matrix keeps the type but is not the identity.
// CHECK-LABEL: func.func @transpose_square
// CHECK-SAME: (%[[X:.+]]: tensor<3x3xf32>)
// CHECK-NEXT: %[[R:.+]] = step.transpose %[[X]], perm = [1, 0] : tensor<3x3xf32> -> tensor<3x3xf32>
// CHECK-NEXT: return %[[R]]
func.func @transpose_square(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = step.transpose %x, perm = [1, 0] : tensor<3x3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @broadcast_in_dim_identity
// CHECK-SAME: (%[[X:.+]]: tensor<?x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @broadcast_in_dim_identity(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = step.broadcast_in_dim %x, dims = [0, 1] : tensor<?x3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_in_dim_of_splat
// CHECK-NEXT: %[[C:.+]] = step.constant dense<2.500000e+00> : tensor<4x3xf16>
// CHECK-NEXT: return %[[C]]
func.func @broadcast_in_dim_of_splat() -> tensor<4x3xf16> {
  %c = step.constant dense<2.5> : tensor<3xf16>
  %0 = step.broadcast_in_dim %c, dims = [1] : tensor<3xf16> -> tensor<4x3xf16>
  return %0 : tensor<4x3xf16>
}

// -----

// CHECK-LABEL: func.func @broadcast_in_dim_of_scalar
// CHECK-NEXT: %[[C:.+]] = step.constant dense<true> : tensor<2x2xi1>
// CHECK-NEXT: return %[[C]]
func.func @broadcast_in_dim_of_scalar() -> tensor<2x2xi1> {
  %c = step.constant dense<true> : tensor<i1>
  %0 = step.broadcast_in_dim %c, dims = [] : tensor<i1> -> tensor<2x2xi1>
  return %0 : tensor<2x2xi1>
}

// -----

// CHECK-LABEL: func.func @broadcast_in_dim_of_non_splat
// CHECK-DAG: %[[C:.+]] = step.constant dense<[1, 2, 3]> : tensor<3xi32>
// CHECK: %[[R:.+]] = step.broadcast_in_dim %[[C]], dims = [1] : tensor<3xi32> -> tensor<2x3xi32>
// CHECK-NEXT: return %[[R]]
func.func @broadcast_in_dim_of_non_splat() -> tensor<2x3xi32> {
  %c = step.constant dense<[1, 2, 3]> : tensor<3xi32>
  %0 = step.broadcast_in_dim %c, dims = [1] : tensor<3xi32> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// CHECK-LABEL: func.func @broadcast_in_dim_expands
// CHECK-SAME: (%[[X:.+]]: tensor<1x3xf32>)
// CHECK-NEXT: %[[R:.+]] = step.broadcast_in_dim %[[X]], dims = [0, 1] : tensor<1x3xf32> -> tensor<5x3xf32>
// CHECK-NEXT: return %[[R]]
func.func @broadcast_in_dim_expands(%x: tensor<1x3xf32>) -> tensor<5x3xf32> {
  %0 = step.broadcast_in_dim %x, dims = [0, 1] : tensor<1x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.slice
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @slice_full
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @slice_full(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = step.slice %x start = [0, 0] limit = [4, 8] strides = [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A stride larger than a size-1 dim still takes its one element.
// CHECK-LABEL: func.func @slice_full_strided
// CHECK-SAME: (%[[X:.+]]: tensor<1x3xi64>)
// CHECK-NEXT: return %[[X]]
func.func @slice_full_strided(%x: tensor<1x3xi64>) -> tensor<1x3xi64> {
  %0 = step.slice %x start = [0, 0] limit = [1, 3] strides = [5, 1] : tensor<1x3xi64> -> tensor<1x3xi64>
  return %0 : tensor<1x3xi64>
}

// -----

// CHECK-LABEL: func.func @slice_partial
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = step.slice %[[X]] start = [0, 2] limit = [4, 8] strides = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
// CHECK-NEXT: return %[[R]]
func.func @slice_partial(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %0 = step.slice %x start = [0, 2] limit = [4, 8] strides = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// [0, 4) of a dynamic dim is not known to be all of it.
// CHECK-LABEL: func.func @slice_of_dynamic
// CHECK-SAME: (%[[X:.+]]: tensor<?xf32>)
// CHECK-NEXT: %[[R:.+]] = step.slice %[[X]] start = [0] limit = [4] strides = [1] : tensor<?xf32> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @slice_of_dynamic(%x: tensor<?xf32>) -> tensor<4xf32> {
  %0 = step.slice %x start = [0] limit = [4] strides = [1] : tensor<?xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @concat_one_input
// CHECK-SAME: (%[[X:.+]]: tensor<2x?xbf16>)
// CHECK-NEXT: return %[[X]]
func.func @concat_one_input(%x: tensor<2x?xbf16>) -> tensor<2x?xbf16> {
  %0 = step.concat %x dim = 1 : tensor<2x?xbf16> -> tensor<2x?xbf16>
  return %0 : tensor<2x?xbf16>
}

// -----

// CHECK-LABEL: func.func @concat_two_inputs
// CHECK-SAME: (%[[X:.+]]: tensor<2xf32>)
// CHECK-NEXT: %[[R:.+]] = step.concat %[[X]], %[[X]] dim = 0 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @concat_two_inputs(%x: tensor<2xf32>) -> tensor<4xf32> {
  %0 = step.concat %x, %x dim = 0 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

// The padding value does not matter when nothing is padded.
// CHECK-LABEL: func.func @pad_zero
// CHECK-SAME: (%[[X:.+]]: tensor<?x3xi32>)
// CHECK-NEXT: return %[[X]]
func.func @pad_zero(%x: tensor<?x3xi32>) -> tensor<?x3xi32> {
  %0 = step.pad %x low = [0, 0] high = [0, 0] value = 5.0 : tensor<?x3xi32> -> tensor<?x3xi32>
  return %0 : tensor<?x3xi32>
}

// -----

// CHECK-LABEL: func.func @pad_nonzero
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[R:.+]] = step.pad %[[X]] low = [0, 1] high = [0, 0] value = 0.000000e+00 : tensor<2x3xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @pad_nonzero(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %0 = step.pad %x low = [0, 1] high = [0, 0] value = 0.0 : tensor<2x3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.reduce_sum
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce_sum_no_dims
// CHECK-SAME: (%[[X:.+]]: tensor<4x?xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reduce_sum_no_dims(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %0 = step.reduce_sum %x dims = [] : tensor<4x?xf32> -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_sum_no_dims_keepdim
// CHECK-SAME: (%[[X:.+]]: tensor<3xi64>)
// CHECK-NEXT: return %[[X]]
func.func @reduce_sum_no_dims_keepdim(%x: tensor<3xi64>) -> tensor<3xi64> {
  %0 = step.reduce_sum %x dims = [] keepdim : tensor<3xi64> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// CHECK-LABEL: func.func @reduce_sum_dims
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = step.reduce_sum %[[X]] dims = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: return %[[R]]
func.func @reduce_sum_dims(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = step.reduce_sum %x dims = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @dropout_p_zero
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xbf16>)
// CHECK-NEXT: return %[[X]]
func.func @dropout_p_zero(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = step.dropout %x p = 0.0 seed = 42 : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @dropout_p_nonzero
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = step.dropout %[[X]] p = 1.000000e-01 seed = 42 : tensor<4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @dropout_p_nonzero(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = step.dropout %x p = 0.1 seed = 42 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
