// RUN: step-opt %s -split-input-file -verify-diagnostics

// One case per verifier error: every constraint Cn of every step op (the
// function is named after the op and the constraint, e.g. @matmul_c2), result
// types that disagree with the inferred ones, operand element types outside an
// op's type constraint, and parser errors.
//
// Errors found by result-type inference are followed by MLIR's generic
// "failed to infer returned types"; both are expected.

//===----------------------------------------------------------------------===//
// step.neg
//===----------------------------------------------------------------------===//

func.func @neg_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.neg' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.neg"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @neg_i1(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.neg' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.neg %x : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.abs
//===----------------------------------------------------------------------===//

func.func @abs_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.abs' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.abs"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @abs_i1(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.abs' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.abs %x : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.relu
//===----------------------------------------------------------------------===//

func.func @relu_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.relu' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.relu"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @relu_i1(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.relu' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.relu %x : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.exp
//===----------------------------------------------------------------------===//

func.func @exp_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.exp' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.exp"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @exp_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.exp' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.exp %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.log
//===----------------------------------------------------------------------===//

func.func @log_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.log' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.log"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @log_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.log' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.log %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.tanh
//===----------------------------------------------------------------------===//

func.func @tanh_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.tanh' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @tanh_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.tanh' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.tanh %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.sigmoid
//===----------------------------------------------------------------------===//

func.func @sigmoid_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.sigmoid' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @sigmoid_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.sigmoid' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.sigmoid %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.sqrt
//===----------------------------------------------------------------------===//

func.func @sqrt_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.sqrt' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @sqrt_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.sqrt' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.sqrt %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.rsqrt
//===----------------------------------------------------------------------===//

func.func @rsqrt_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.rsqrt' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.rsqrt"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @rsqrt_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.rsqrt' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.rsqrt %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.erf
//===----------------------------------------------------------------------===//

func.func @erf_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.erf' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.erf"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @erf_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.erf' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.erf %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.sin
//===----------------------------------------------------------------------===//

func.func @sin_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.sin' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.sin"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @sin_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.sin' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.sin %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.cos
//===----------------------------------------------------------------------===//

func.func @cos_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.cos' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.cos"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @cos_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.cos' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.cos %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.add
//===----------------------------------------------------------------------===//

func.func @add_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.add' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.add %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @add_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.add' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @add_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.add' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.add %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @add_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.add"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @add_i1(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.add' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.add %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.sub
//===----------------------------------------------------------------------===//

func.func @sub_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.sub' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.sub %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @sub_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.sub' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.sub %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @sub_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.sub' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.sub %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @sub_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.sub' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.sub"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @sub_i1(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.sub' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.sub %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.mul
//===----------------------------------------------------------------------===//

func.func @mul_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.mul' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.mul %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @mul_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.mul' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.mul %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @mul_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.mul' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.mul %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @mul_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.mul' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.mul"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @mul_i1(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.mul' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.mul %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.div
//===----------------------------------------------------------------------===//

func.func @div_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.div' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.div %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @div_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.div' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.div %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @div_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.div' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.div %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @div_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.div' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.div"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @div_i1(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.div' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.div %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.max
//===----------------------------------------------------------------------===//

func.func @max_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.max' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.max %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @max_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.max' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.max %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @max_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.max' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.max %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @max_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.max' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.max"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @max_i1(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.max' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.max %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.min
//===----------------------------------------------------------------------===//

func.func @min_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.min' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.min %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @min_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.min' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.min %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @min_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.min' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.min %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @min_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.min' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.min"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @min_i1(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.min' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.min %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.pow
//===----------------------------------------------------------------------===//

func.func @pow_c1_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.pow' op operands have different element types (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<2x3xf16>'; insert step.cast}}
  %0 = step.pow %a, %b : tensor<2x3xf32>, tensor<2x3xf16>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @pow_c1_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.pow' op operands have different ranks (C1): lhs 'tensor<2x3xf32>', rhs 'tensor<3xf32>'; broadcast explicitly}}
  %0 = step.pow %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @pow_c2(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.pow' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4}}
  %0 = step.pow %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @pow_c2_result(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>) -> tensor<?x3xf32> {
  // The result takes the static size of a dimension that is dynamic in one operand.
  // expected-error @+2 {{'step.pow' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.pow"(%a, %b) : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @pow_i32(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.pow' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.pow %a, %a : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.gelu
//===----------------------------------------------------------------------===//

func.func @gelu_c1(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+2 {{'step.gelu' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.gelu"(%x) <{approximate = 0 : i32}> : (tensor<4xf32>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @gelu_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.gelu' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.gelu %x approximate none : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @gelu_unknown_approximation(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]}}
  %0 = step.gelu %x approximate exact : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gelu_approximation_out_of_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{invalid properties {approximate = 2 : i32} for op step.gelu}}
  %0 = "step.gelu"(%x) <{approximate = 2 : i32}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.gelu_grad
//===----------------------------------------------------------------------===//

func.func @gelu_grad_c1(%g: tensor<4xf32>, %x: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.gelu_grad' op operands have different element types (C1): grad 'tensor<4xf32>', x 'tensor<4xbf16>'; insert step.cast to convert one}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.gelu_grad"(%g, %x) <{approximate = 1 : i32}> : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gelu_grad_c2(%g: tensor<4xf32>, %x: tensor<5xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.gelu_grad' op dimension 0 differs (C2): grad 'tensor<4xf32>' has 4, x 'tensor<5xf32>' has 5; broadcast explicitly with step.broadcast_in_dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.gelu_grad"(%g, %x) <{approximate = 0 : i32}> : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gelu_grad_i32(%g: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.gelu_grad' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = step.gelu_grad %g, %g approximate none : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.compare
//===----------------------------------------------------------------------===//

func.func @compare_c1_element_type(%a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.compare' op operands have different element types (C1): lhs 'tensor<4xf32>', rhs 'tensor<4xi32>'}}
  %0 = step.compare eq, %a, %b : tensor<4xf32>, tensor<4xi32>
  return %0 : tensor<4xi1>
}

// -----

func.func @compare_c1_rank(%a: tensor<4xf32>, %b: tensor<1x4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.compare' op operands have different ranks (C1): lhs 'tensor<4xf32>', rhs 'tensor<1x4xf32>'}}
  %0 = step.compare lt, %a, %b : tensor<4xf32>, tensor<1x4xf32>
  return %0 : tensor<4xi1>
}

// -----

func.func @compare_c2(%a: tensor<4x?xf32>, %b: tensor<5x2xf32>) -> tensor<4x2xi1> {
  // expected-error @+1 {{'step.compare' op dimension 0 differs (C2): lhs 'tensor<4x?xf32>' has 4, rhs 'tensor<5x2xf32>' has 5}}
  %0 = step.compare ge, %a, %b : tensor<4x?xf32>, tensor<5x2xf32>
  return %0 : tensor<4x2xi1>
}

// -----

func.func @compare_result_not_i1(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.compare' op result #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = "step.compare"(%a, %a) <{direction = 0 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @compare_unknown_direction(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'direction' [eq, ne, lt, le, gt, ge]}}
  %0 = step.compare less, %a, %a : tensor<4xf32>
  return %0 : tensor<4xi1>
}

// -----

func.func @compare_direction_out_of_range(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{invalid properties {direction = 6 : i32} for op step.compare}}
  %0 = "step.compare"(%a, %a) <{direction = 6 : i32}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.select
//===----------------------------------------------------------------------===//

func.func @select_c1_element_type(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.select' op operands have different element types (C1)}}
  %0 = step.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xbf16>
  return %0 : tensor<4xf32>
}

// -----

func.func @select_c1_rank(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.select' op operands have different ranks (C1)}}
  %0 = step.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<f32>
  return %0 : tensor<4xf32>
}

// -----

func.func @select_c2_branches(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.select' op dimension 0 differs (C2)}}
  %0 = step.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<3xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @select_c2_pred_rank(%p: tensor<1x4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.select' op pred 'tensor<1x4xi1>' must have the rank of the branches 'tensor<4xf32>' (C2)}}
  %0 = step.select %p, %a, %a : tensor<1x4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @select_c2_pred_dim(%p: tensor<2x5xi1>, %a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'step.select' op dimension 1 of pred 'tensor<2x5xi1>' differs from the branches 'tensor<2x4xf32>' (C2)}}
  %0 = step.select %p, %a, %a : tensor<2x5xi1>, tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @select_pred_not_i1(%p: tensor<4xf32>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.select' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = step.select %p, %a, %a : tensor<4xf32>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.cast
//===----------------------------------------------------------------------===//

func.func @cast_c1(%x: tensor<4x8xf32>) -> tensor<8x4xbf16> {
  // expected-error @+1 {{'step.cast' op operand 'tensor<4x8xf32>' and result 'tensor<8x4xbf16>' must have the same shape (C1)}}
  %0 = step.cast %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return %0 : tensor<8x4xbf16>
}

// -----

func.func @cast_c1_dynamic(%x: tensor<?xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'step.cast' op operand 'tensor<?xf32>' and result 'tensor<4xf16>' must have the same shape (C1)}}
  %0 = step.cast %x : tensor<?xf32> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @cast_f64(%x: tensor<4xf32>) -> tensor<4xf64> {
  // expected-error @+1 {{'step.cast' op result #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values, but got 'tensor<4xf64>'}}
  %0 = step.cast %x : tensor<4xf32> -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

//===----------------------------------------------------------------------===//
// step.constant
//===----------------------------------------------------------------------===//

func.func @constant_c1() {
  // expected-error @+2 {{'step.constant' op value must have a static tensor type (C1), found 'vector<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.constant"() <{value = dense<1.0> : vector<2xf32>}> : () -> tensor<2xf32>
  return
}

// -----

func.func @constant_result_type() -> tensor<4xf32> {
  // expected-error @+2 {{'step.constant' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @constant_i8() -> tensor<2xi8> {
  // expected-error @+1 {{'step.constant' op result #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values, but got 'tensor<2xi8>'}}
  %0 = step.constant dense<1> : tensor<2xi8>
  return %0 : tensor<2xi8>
}

// -----

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

func.func @broadcast_in_dim_c1(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op dims [0, 1] has 2 entries, expected rank(operand) = 1 for 'tensor<3xf32>' (C1)}}
  %0 = step.broadcast_in_dim %x, dims = [0, 1] : tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_in_dim_c2_range(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op dims [2] maps operand dim 0 to 2, outside [0, 2) of result 'tensor<2x3xf32>' (C2)}}
  %0 = step.broadcast_in_dim %x, dims = [2] : tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_in_dim_c2_negative(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op dims [-1] maps operand dim 0 to -1, outside [0, 2) of result 'tensor<2x3xf32>' (C2)}}
  %0 = step.broadcast_in_dim %x, dims = [-1] : tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_in_dim_c2_order(%x: tensor<3x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op dims [1, 0] must be strictly increasing (C2)}}
  %0 = step.broadcast_in_dim %x, dims = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_in_dim_c2_repeated(%x: tensor<1x1xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op dims [1, 1] must be strictly increasing (C2)}}
  %0 = step.broadcast_in_dim %x, dims = [1, 1] : tensor<1x1xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_in_dim_c3(%x: tensor<2xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op operand dim 0 of 'tensor<2xf32>' has size 2, expected 1 or 3 (result dim 1 of 'tensor<4x3xf32>') (C3)}}
  %0 = step.broadcast_in_dim %x, dims = [1] : tensor<2xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @broadcast_in_dim_c4_static_operand(%x: tensor<3xf32>) -> tensor<2x?xf32> {
  // expected-error @+1 {{'step.broadcast_in_dim' op result dim 1 of 'tensor<2x?xf32>' is dynamic but operand dim 0 of 'tensor<3xf32>' is static (C4)}}
  %0 = step.broadcast_in_dim %x, dims = [1] : tensor<3xf32> -> tensor<2x?xf32>
  return %0 : tensor<2x?xf32>
}

// -----


func.func @broadcast_in_dim_c5(%x: tensor<3xf32>) -> tensor<2x3xf16> {
  // expected-error @+1 {{'step.broadcast_in_dim' op operand 'tensor<3xf32>' and result 'tensor<2x3xf16>' have different element types (C5)}}
  %0 = step.broadcast_in_dim %x, dims = [1] : tensor<3xf32> -> tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

func.func @reshape_c1(%x: tensor<4x8xf32>) -> tensor<32xi32> {
  // expected-error @+1 {{'step.reshape' op operand 'tensor<4x8xf32>' and result 'tensor<32xi32>' have different element types (C1)}}
  %0 = step.reshape %x : tensor<4x8xf32> -> tensor<32xi32>
  return %0 : tensor<32xi32>
}

// -----

func.func @reshape_c2(%x: tensor<4x8xf32>) -> tensor<30xf32> {
  // expected-error @+1 {{'step.reshape' op operand 'tensor<4x8xf32>' has 32 elements but result 'tensor<30xf32>' has 30 (C2)}}
  %0 = step.reshape %x : tensor<4x8xf32> -> tensor<30xf32>
  return %0 : tensor<30xf32>
}

// -----

func.func @reshape_c3_two_dynamic(%x: tensor<?x8xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'step.reshape' op result 'tensor<?x?xf32>' may have one dynamic dim, and only when the operand 'tensor<?x8xf32>' has one (C3)}}
  %0 = step.reshape %x : tensor<?x8xf32> -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @reshape_c3_static_operand(%x: tensor<4x8xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'step.reshape' op result 'tensor<?x4xf32>' may have one dynamic dim, and only when the operand 'tensor<4x8xf32>' has one (C3)}}
  %0 = step.reshape %x : tensor<4x8xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

func.func @transpose_c1_repeated(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{'step.transpose' op perm [0, 0] is not a permutation of [0, 2) for operand 'tensor<2x3xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.transpose %x, perm = [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @transpose_c1_size(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'step.transpose' op perm [0] is not a permutation of [0, 2) for operand 'tensor<2x3xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.transpose %x, perm = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @transpose_c1_range(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{'step.transpose' op perm [2, 0] is not a permutation of [0, 2) for operand 'tensor<2x3xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.transpose %x, perm = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @transpose_result_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'step.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.transpose %x, perm = [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.slice
//===----------------------------------------------------------------------===//

func.func @slice_c1(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'step.slice' op start [0, 0], limit [4] and strides [1, 1] must each have 2 entries for operand 'tensor<4x8xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.slice %x start = [0, 0] limit = [4] strides = [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @slice_c2_negative_start(%x: tensor<4x8xf32>) -> tensor<5x8xf32> {
  // expected-error @+2 {{'step.slice' op dim 0: expected 0 <= start (-1) <= limit (4) <= size (4) for operand 'tensor<4x8xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.slice %x start = [-1, 0] limit = [4, 8] strides = [1, 1] : tensor<4x8xf32> -> tensor<5x8xf32>
  return %0 : tensor<5x8xf32>
}

// -----

func.func @slice_c2_start_after_limit(%x: tensor<4x8xf32>) -> tensor<4x0xf32> {
  // expected-error @+2 {{'step.slice' op dim 1: expected 0 <= start (6) <= limit (5) <= size (8) for operand 'tensor<4x8xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.slice %x start = [0, 6] limit = [4, 5] strides = [1, 1] : tensor<4x8xf32> -> tensor<4x0xf32>
  return %0 : tensor<4x0xf32>
}

// -----

func.func @slice_c2_limit_past_end(%x: tensor<4x8xf32>) -> tensor<4x9xf32> {
  // expected-error @+2 {{'step.slice' op dim 1: expected 0 <= start (0) <= limit (9) <= size (8) for operand 'tensor<4x8xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.slice %x start = [0, 0] limit = [4, 9] strides = [1, 1] : tensor<4x8xf32> -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}

// -----

func.func @slice_c3(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'step.slice' op dim 1: stride 0 must be >= 1 (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.slice %x start = [0, 0] limit = [4, 8] strides = [1, 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @slice_result_type(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // ceil((8 - 2) / 2) = 3 elements, not 4.
  // expected-error @+2 {{'step.slice' op inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.slice %x start = [0, 2] limit = [4, 8] strides = [1, 2] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

func.func @concat_c1() -> tensor<0xf32> {
  // expected-error @+2 {{'step.concat' op needs at least one input (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.concat"() <{dimension = 0 : i64}> : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @concat_c2_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<4x3xf32> {
  // expected-error @+2 {{'step.concat' op input 1 'tensor<2x3xf16>' differs in element type or rank from input 0 'tensor<2x3xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<2x3xf16> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_c2_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<5x3xf32> {
  // expected-error @+2 {{'step.concat' op input 1 'tensor<3xf32>' differs in element type or rank from input 0 'tensor<2x3xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @concat_c3(%a: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{'step.concat' op dim 2 is outside [0, 2) for input 'tensor<2x3xf32>' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.concat %a, %a dim = 2 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_c3_negative(%a: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{'step.concat' op dim -1 is outside [0, 2) for input 'tensor<2x3xf32>' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.concat %a, %a dim = -1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_c4(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{'step.concat' op input 1 'tensor<2x4xf32>' has size 4 in dim 1 but the inputs before it have 3 (C4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_result_type(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'step.concat' op inferred type(s) 'tensor<6x3xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

func.func @pad_c1(%x: tensor<2x3xf32>) -> tensor<3x3xf32> {
  // expected-error @+2 {{'step.pad' op low [1] and high [0, 0] must each have 2 entries for operand 'tensor<2x3xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.pad %x low = [1] high = [0, 0] value = 0.0 : tensor<2x3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @pad_c2(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+2 {{'step.pad' op dim 1: padding low 0, high -1 must be >= 0 (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.pad %x low = [0, 0] high = [0, -1] value = 0.0 : tensor<2x3xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @pad_result_type(%x: tensor<2x3xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'step.pad' op inferred type(s) 'tensor<3x5xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.pad %x low = [0, 1] high = [1, 1] value = 0.0 : tensor<2x3xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.iota
//===----------------------------------------------------------------------===//

func.func @iota_c1_dynamic() -> tensor<?xi64> {
  // expected-error @+1 {{'step.iota' op result 'tensor<?xi64>' must have a static shape of rank >= 1, or name each dynamic dim's symbol in step.dims (C1)}}
  %0 = step.iota dim = 0 : tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @iota_c1_unnamed_dim() -> tensor<4x?xi64> {
  // expected-error @+1 {{'step.iota' op result 'tensor<4x?xi64>' must have a static shape of rank >= 1, or name each dynamic dim's symbol in step.dims (C1)}}
  %0 = step.iota dim = 0 {step.dims = ["T", ""]} : tensor<4x?xi64>
  return %0 : tensor<4x?xi64>
}

// -----

func.func @iota_c1_rank0() -> tensor<i64> {
  // expected-error @+1 {{'step.iota' op result 'tensor<i64>' must have a static shape of rank >= 1 (C1)}}
  %0 = step.iota dim = 0 : tensor<i64>
  return %0 : tensor<i64>
}

// -----

func.func @iota_c2() -> tensor<4x8xi32> {
  // expected-error @+1 {{'step.iota' op dim 2 is outside [0, 2) for result 'tensor<4x8xi32>' (C2)}}
  %0 = step.iota dim = 2 : tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @iota_c2_negative() -> tensor<4x8xi32> {
  // expected-error @+1 {{'step.iota' op dim -1 is outside [0, 2) for result 'tensor<4x8xi32>' (C2)}}
  %0 = step.iota dim = -1 : tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @iota_c3() -> tensor<4xi1> {
  // expected-error @+1 {{'step.iota' op result #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = step.iota dim = 0 : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----
//===----------------------------------------------------------------------===//
// step.reduce_sum
//===----------------------------------------------------------------------===//

func.func @reduce_sum_c1(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.reduce_sum' op dims [2] has 2, outside [0, 2) for operand 'tensor<4x8xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_sum %x dims = [2] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_sum_c1_negative(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.reduce_sum' op dims [-1] has -1, outside [0, 2) for operand 'tensor<4x8xf32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_sum %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_sum_c2(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.reduce_sum' op dims [1, 1] repeats 1 (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_sum %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_sum_result_type_keepdim(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // With keepdim the reduced dim stays as size 1.
  // expected-error @+2 {{'step.reduce_sum' op inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_sum %x dims = [1] keepdim : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_sum_i1(%x: tensor<4x8xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.reduce_sum' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4x8xi1>'}}
  %0 = step.reduce_sum %x dims = [1] : tensor<4x8xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.reduce_max
//===----------------------------------------------------------------------===//

func.func @reduce_max_c1(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // expected-error @+2 {{'step.reduce_max' op dims [2] has 2, outside [0, 2) for operand 'tensor<4x8xi32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_max %x dims = [2] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @reduce_max_c1_negative(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // expected-error @+2 {{'step.reduce_max' op dims [-1] has -1, outside [0, 2) for operand 'tensor<4x8xi32>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_max %x dims = [-1] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @reduce_max_c2(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // expected-error @+2 {{'step.reduce_max' op dims [1, 1] repeats 1 (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_max %x dims = [1, 1] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @reduce_max_result_type_keepdim(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // With keepdim the reduced dim stays as size 1.
  // expected-error @+2 {{'step.reduce_max' op inferred type(s) 'tensor<4x1xi32>' are incompatible with return type(s) of operation 'tensor<4xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_max %x dims = [1] keepdim : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @reduce_max_i1(%x: tensor<4x8xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.reduce_max' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4x8xi1>'}}
  %0 = step.reduce_max %x dims = [1] : tensor<4x8xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.reduce_mean
//===----------------------------------------------------------------------===//

func.func @reduce_mean_c1(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.reduce_mean' op dims [2] has 2, outside [0, 2) for operand 'tensor<4x8xf16>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_mean %x dims = [2] : tensor<4x8xf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @reduce_mean_c1_negative(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.reduce_mean' op dims [-1] has -1, outside [0, 2) for operand 'tensor<4x8xf16>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_mean %x dims = [-1] : tensor<4x8xf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @reduce_mean_c2(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.reduce_mean' op dims [1, 1] repeats 1 (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_mean %x dims = [1, 1] : tensor<4x8xf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @reduce_mean_result_type_keepdim(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  // With keepdim the reduced dim stays as size 1.
  // expected-error @+2 {{'step.reduce_mean' op inferred type(s) 'tensor<4x1xf16>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.reduce_mean %x dims = [1] keepdim : tensor<4x8xf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @reduce_mean_i32(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'step.reduce_mean' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xi32>'}}
  %0 = step.reduce_mean %x dims = [1] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.softmax
//===----------------------------------------------------------------------===//

func.func @softmax_c1(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'step.softmax' op dim 2 is outside [0, 2) for operand 'tensor<4x10xf32>' (C1)}}
  %0 = step.softmax %x dim = 2 : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @softmax_c1_negative(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'step.softmax' op dim -1 is outside [0, 2) for operand 'tensor<4x10xf32>' (C1)}}
  %0 = step.softmax %x dim = -1 : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @softmax_c1_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'step.softmax' op dim 0 is outside [0, 0) for operand 'tensor<f32>' (C1)}}
  %0 = step.softmax %x dim = 0 : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @softmax_result_type(%x: tensor<4x10xf32>) -> tensor<4x10xf16> {
  // expected-error @+2 {{'step.softmax' op inferred type(s) 'tensor<4x10xf32>' are incompatible with return type(s) of operation 'tensor<4x10xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.softmax"(%x) <{dimension = 1 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf16>
  return %0 : tensor<4x10xf16>
}

// -----

func.func @softmax_i32(%x: tensor<4x10xi32>) -> tensor<4x10xi32> {
  // expected-error @+1 {{'step.softmax' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x10xi32>'}}
  %0 = step.softmax %x dim = 1 : tensor<4x10xi32>
  return %0 : tensor<4x10xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.log_softmax
//===----------------------------------------------------------------------===//

func.func @log_softmax_c1(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'step.log_softmax' op dim 2 is outside [0, 2) for operand 'tensor<4x10xf32>' (C1)}}
  %0 = step.log_softmax %x dim = 2 : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @log_softmax_c1_negative(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'step.log_softmax' op dim -1 is outside [0, 2) for operand 'tensor<4x10xf32>' (C1)}}
  %0 = step.log_softmax %x dim = -1 : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @log_softmax_c1_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'step.log_softmax' op dim 0 is outside [0, 0) for operand 'tensor<f32>' (C1)}}
  %0 = step.log_softmax %x dim = 0 : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @log_softmax_result_type(%x: tensor<4x10xf32>) -> tensor<4x10xf16> {
  // expected-error @+2 {{'step.log_softmax' op inferred type(s) 'tensor<4x10xf32>' are incompatible with return type(s) of operation 'tensor<4x10xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.log_softmax"(%x) <{dimension = 1 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf16>
  return %0 : tensor<4x10xf16>
}

// -----

func.func @log_softmax_i32(%x: tensor<4x10xi32>) -> tensor<4x10xi32> {
  // expected-error @+1 {{'step.log_softmax' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x10xi32>'}}
  %0 = step.log_softmax %x dim = 1 : tensor<4x10xi32>
  return %0 : tensor<4x10xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

func.func @matmul_c1(%a: tensor<8xf32>, %b: tensor<8x4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.matmul' op lhs 'tensor<8xf32>' must have rank >= 2 (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @matmul_c2(%a: tensor<2x3x8xf32>, %b: tensor<8xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'step.matmul' op rhs 'tensor<8xf32>' must have rank 2 or the rank of lhs 'tensor<2x3x8xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @matmul_c2_rhs_higher_rank(%a: tensor<3x8xf32>, %b: tensor<2x8x4xf32>) -> tensor<2x3x4xf32> {
  // A rank-2 lhs is not broadcast over a batched rhs.
  // expected-error @+2 {{'step.matmul' op rhs 'tensor<2x8x4xf32>' must have rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<3x8xf32>, tensor<2x8x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @matmul_c3(%a: tensor<3x8xf32>, %b: tensor<8x4xbf16>) -> tensor<3x4xf32> {
  // expected-error @+2 {{'step.matmul' op lhs 'tensor<3x8xf32>' and rhs 'tensor<8x4xbf16>' have different element types (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<3x8xf32>, tensor<8x4xbf16> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @matmul_c4(%a: tensor<2x3x8xf32>, %b: tensor<5x8x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+2 {{'step.matmul' op batch dim 0 differs: lhs 'tensor<2x3x8xf32>', rhs 'tensor<5x8x4xf32>' (C4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<2x3x8xf32>, tensor<5x8x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @matmul_c5(%a: tensor<3x8xf32>, %b: tensor<7x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+2 {{'step.matmul' op contracting dims differ: lhs 'tensor<3x8xf32>' has K = 8, rhs 'tensor<7x4xf32>' has K = 7 (C5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<3x8xf32>, tensor<7x4xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @matmul_c5_transposed(%a: tensor<8x3xf32>, %b: tensor<8x4xf32>) -> tensor<3x8xf32> {
  // With transpose_b, K of rhs [8, 4] is its last dim (4), not 8.
  // expected-error @+2 {{'step.matmul' op contracting dims differ: lhs 'tensor<8x3xf32>' (transposed) has K = 8, rhs 'tensor<8x4xf32>' (transposed) has K = 4 (C5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b transpose_a transpose_b : tensor<8x3xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

func.func @matmul_result_type(%a: tensor<3x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{'step.matmul' op inferred type(s) 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<4x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.matmul %a, %b : tensor<3x8xf32>, tensor<8x4xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @matmul_i64(%a: tensor<3x8xi64>, %b: tensor<8x4xi64>) -> tensor<3x4xi64> {
  // expected-error @+1 {{'step.matmul' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<3x8xi64>'}}
  %0 = step.matmul %a, %b : tensor<3x8xi64>, tensor<8x4xi64> -> tensor<3x4xi64>
  return %0 : tensor<3x4xi64>
}

// -----

func.func @matmul_transpose_flags_order(%a: tensor<3x8xf32>, %b: tensor<4x8xf32>) -> tensor<3x4xf32> {
  // The assembly format fixes the order transpose_a, transpose_b.
  // expected-error @+1 {{expected ':'}}
  %0 = step.matmul %a, %b transpose_b transpose_a : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

func.func @layer_norm_c1_rank0_weight(%x: tensor<4x8xf32>, %w: tensor<f32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.layer_norm' op weight 'tensor<f32>' must have rank in [1, 2] for operand 'tensor<4x8xf32>' (C1)}}
  %0 = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xf32>, tensor<f32>, tensor<f32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_c1_weight_rank(%x: tensor<8xf32>, %w: tensor<1x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.layer_norm' op weight 'tensor<1x8xf32>' must have rank in [1, 1] for operand 'tensor<8xf32>' (C1)}}
  %0 = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @layer_norm_c2(%x: tensor<4x8xf32>, %w: tensor<4xf32>) -> tensor<4x8xf32> {
  // Weight covers the trailing dims ([8]), not the leading ones.
  // expected-error @+1 {{'step.layer_norm' op weight 'tensor<4xf32>' must equal the trailing dims of operand 'tensor<4x8xf32>' (C2)}}
  %0 = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_c3(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.layer_norm' op bias 'tensor<1x8xf32>' must have the shape of weight 'tensor<8xf32>' (C3)}}
  %0 = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_c4(%x: tensor<4x8xbf16>, %w: tensor<8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'step.layer_norm' op operand 'tensor<4x8xbf16>', weight 'tensor<8xf32>' and bias 'tensor<8xf32>' need one element type (C4)}}
  %0 = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xbf16>
}

// -----

func.func @layer_norm_c4_bias(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.layer_norm' op operand 'tensor<4x8xf32>', weight 'tensor<8xf32>' and bias 'tensor<8xf16>' need one element type (C4)}}
  %0 = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf16>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_c5(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.layer_norm' op eps 0.000000e+00 must be > 0 (C5)}}
  %0 = step.layer_norm %x, %w, %w eps = 0.0 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_c5_negative(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.layer_norm' op eps -1.000000e-05 must be > 0 (C5)}}
  %0 = step.layer_norm %x, %w, %w eps = -1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_result_type(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf16> {
  // expected-error @+2 {{'step.layer_norm' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.layer_norm"(%x, %w, %w) <{epsilon = 1.0e-05 : f64}> : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

func.func @layer_norm_i32(%x: tensor<4x8xi32>, %w: tensor<8xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'step.layer_norm' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xi32>'}}
  %0 = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x8xi32>, tensor<8xi32>, tensor<8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.embedding
//===----------------------------------------------------------------------===//

func.func @embedding_c1(%i: tensor<4xi32>, %w: tensor<16xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.embedding' op weight 'tensor<16xf32>' must have rank 2 ([V, D]) (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.embedding %i, %w : tensor<4xi32>, tensor<16xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @embedding_result_type(%i: tensor<4xi32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  // The result appends D (8), not V (16).
  // expected-error @+2 {{'step.embedding' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.embedding %i, %w : tensor<4xi32>, tensor<16x8xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @embedding_float_indices(%i: tensor<4xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.embedding' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = step.embedding %i, %w : tensor<4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @embedding_integer_weight(%i: tensor<4xi64>, %w: tensor<16x8xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'step.embedding' op operand #1 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<16x8xi32>'}}
  %0 = step.embedding %i, %w : tensor<4xi64>, tensor<16x8xi32> -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

func.func @cross_entropy_c1_logits(%l: tensor<2x4x10xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  // expected-error @+2 {{'step.cross_entropy' op expects logits [N, C] and targets [N], found 'tensor<2x4x10xf32>' and 'tensor<2xi64>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy %l, %t reduction = mean : tensor<2x4x10xf32>, tensor<2xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cross_entropy_c1_targets(%l: tensor<4x10xf32>, %t: tensor<4x1xi64>) -> tensor<f32> {
  // expected-error @+2 {{'step.cross_entropy' op expects logits [N, C] and targets [N], found 'tensor<4x10xf32>' and 'tensor<4x1xi64>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy %l, %t reduction = sum : tensor<4x10xf32>, tensor<4x1xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cross_entropy_c2(%l: tensor<4x10xf32>, %t: tensor<5xi64>) -> tensor<f32> {
  // expected-error @+2 {{'step.cross_entropy' op logits 'tensor<4x10xf32>' and targets 'tensor<5xi64>' disagree on N (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy %l, %t reduction = mean : tensor<4x10xf32>, tensor<5xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cross_entropy_result_type_none(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // reduction = none keeps one loss per row.
  // expected-error @+2 {{'step.cross_entropy' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy %l, %t reduction = none : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cross_entropy_result_type_mean(%l: tensor<4x10xbf16>, %t: tensor<4xi64>) -> tensor<f32> {
  // The loss has the logits' element type.
  // expected-error @+2 {{'step.cross_entropy' op inferred type(s) 'tensor<bf16>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy %l, %t reduction = mean : tensor<4x10xbf16>, tensor<4xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cross_entropy_float_targets(%l: tensor<4x10xf32>, %t: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'step.cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = step.cross_entropy %l, %t reduction = mean : tensor<4x10xf32>, tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cross_entropy_unknown_reduction(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'reduction' [none, mean, sum]}}
  %0 = step.cross_entropy %l, %t reduction = avg : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

func.func @dropout_c1_one(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.dropout' op p = 1.000000e+00 must be in [0, 1) (C1)}}
  %0 = step.dropout %x p = 1.0 seed = 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dropout_c2_offset_type(%x: tensor<4x8xf32>, %t: tensor<i32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.dropout' op offset must be tensor<i64>, found 'tensor<i32>' (C2)}}
  %0 = step.dropout %x offset %t p = 0.5 seed = 0 : tensor<4x8xf32>, tensor<i32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dropout_c2_offset_rank(%x: tensor<4x8xf32>, %t: tensor<2xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.dropout' op offset must be tensor<i64>, found 'tensor<2xi64>' (C2)}}
  %0 = step.dropout %x offset %t p = 0.5 seed = 0 : tensor<4x8xf32>, tensor<2xi64>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dropout_c1_negative(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.dropout' op p = -1.000000e-01 must be in [0, 1) (C1)}}
  %0 = step.dropout %x p = -0.1 seed = 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dropout_c1_nan(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.dropout' op p = nan must be in [0, 1) (C1)}}
  %0 = step.dropout %x p = 0x7FF8000000000000 seed = 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @dropout_result_type(%x: tensor<4x8xf32>) -> tensor<4x8xf16> {
  // expected-error @+2 {{'step.dropout' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.dropout"(%x) <{p = 1.0e-01 : f64, seed = 0 : i64}> : (tensor<4x8xf32>) -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

func.func @dropout_i32(%x: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'step.dropout' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xi32>'}}
  %0 = step.dropout %x p = 0.5 seed = 0 : tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

func.func @attention_c1_rank1(%q: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'step.attention' op query 'tensor<8xf32>', key 'tensor<8xf32>' and value 'tensor<8xf32>' need one rank >= 2 (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %q, %q : tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @attention_c1_ranks_differ(%q: tensor<2x16x8xf32>, %k: tensor<16x8xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+2 {{'step.attention' op query 'tensor<2x16x8xf32>', key 'tensor<16x8xf32>' and value 'tensor<2x16x8xf32>' need one rank >= 2 (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %k, %q : tensor<2x16x8xf32>, tensor<16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>
  return %0 : tensor<2x16x8xf32>
}

// -----

func.func @attention_c2(%q: tensor<16x8xf32>, %v: tensor<16x8xf16>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention' op query 'tensor<16x8xf32>', key 'tensor<16x8xf32>' and value 'tensor<16x8xf16>' need one element type (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %q, %v : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf16> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_c3_leading(%q: tensor<2x4x16x8xf32>, %k: tensor<2x3x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+2 {{'step.attention' op leading dim 1 differs among query 'tensor<2x4x16x8xf32>', key 'tensor<2x3x16x8xf32>', value 'tensor<2x3x16x8xf32>' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %k, %k : tensor<2x4x16x8xf32>, tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32> -> tensor<2x4x16x8xf32>
  return %0 : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_c3_head_dim(%q: tensor<16x8xf32>, %k: tensor<16x4xf32>, %v: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention' op query 'tensor<16x8xf32>' and key 'tensor<16x4xf32>' disagree on the head dim D (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %k, %v : tensor<16x8xf32>, tensor<16x4xf32>, tensor<16x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_c3_key_length(%q: tensor<16x8xf32>, %k: tensor<12x8xf32>, %v: tensor<10x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention' op key 'tensor<12x8xf32>' and value 'tensor<10x8xf32>' disagree on the key length Tk (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %k, %v : tensor<16x8xf32>, tensor<12x8xf32>, tensor<10x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_c4_zero(%q: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention' op scale 0.000000e+00 must be > 0 (C4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %q, %q scale = 0.0 : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_c4_negative(%q: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention' op scale -5.000000e-01 must be > 0 (C4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %q, %q causal scale = -0.5 : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_result_type(%q: tensor<16x8xf32>, %k: tensor<12x8xf32>, %v: tensor<12x4xf32>) -> tensor<16x8xf32> {
  // The output takes the value's last dim (4), not the query's (8).
  // expected-error @+2 {{'step.attention' op inferred type(s) 'tensor<16x4xf32>' are incompatible with return type(s) of operation 'tensor<16x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.attention %q, %k, %v : tensor<16x8xf32>, tensor<12x8xf32>, tensor<12x4xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_grad_c3(%q: tensor<16x8xf32>, %k: tensor<16x4xf32>, %g: tensor<16x4xf32>) -> tensor<16x8xf32> {
  // The checks of step.attention apply to the first three operands.
  // expected-error @+2 {{'step.attention_grad' op query 'tensor<16x8xf32>' and key 'tensor<16x4xf32>' disagree on the head dim D (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = step.attention_grad %q, %k, %k, %g : tensor<16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32> -> tensor<16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>
  return %0#0 : tensor<16x8xf32>
}

// -----

func.func @attention_grad_c5_shape(%q: tensor<16x8xf32>, %k: tensor<12x8xf32>, %v: tensor<12x4xf32>, %g: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention_grad' op grad 'tensor<16x8xf32>' must have the attention result's type 'tensor<16x4xf32>' (C5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = step.attention_grad %q, %k, %v, %g : tensor<16x8xf32>, tensor<12x8xf32>, tensor<12x4xf32>, tensor<16x8xf32> -> tensor<16x8xf32>, tensor<12x8xf32>, tensor<12x4xf32>
  return %0#0 : tensor<16x8xf32>
}

// -----

func.func @attention_grad_c5_dtype(%q: tensor<16x8xf32>, %g: tensor<16x8xbf16>) -> tensor<16x8xf32> {
  // expected-error @+2 {{'step.attention_grad' op grad 'tensor<16x8xbf16>' must have the attention result's type 'tensor<16x8xf32>' (C5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = step.attention_grad %q, %q, %q, %g causal : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xbf16> -> tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
  return %0#0 : tensor<16x8xf32>
}

// -----

func.func @attention_c5(%q: tensor<16x8xf32>, %l: tensor<1xi64>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'step.attention' op operand #3 must be 0D tensor of 64-bit signless integer values, but got 'tensor<1xi64>'}}
  %0 = step.attention %q, %q, %q valid %l : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<1xi64> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @attention_grad_c6(%q: tensor<16x8xf32>, %l: tensor<i32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'step.attention_grad' op operand #4 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0:3 = step.attention_grad %q, %q, %q, %q valid %l : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i32> -> tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
  return %0#0 : tensor<16x8xf32>
}

// -----

func.func @attention_lse_c6(%q: tensor<2x16x8xf32>) -> tensor<2x16x8xf32> {
  // The log-sum-exp is f32 [2, 16] (q's shape without D).
  // expected-error @+2 {{'step.attention_lse' op inferred type(s) 'tensor<2x16x8xf32>', 'tensor<2x16xf32>' are incompatible with return type(s) of operation 'tensor<2x16x8xf32>', 'tensor<2x16x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = step.attention_lse %q, %q, %q : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>, tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

func.func @attention_grad_c7(%q: tensor<2x16x8xf32>, %lse: tensor<2x8xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+2 {{'step.attention_grad' op saved 'tensor<2x16x8xf32>', 'tensor<2x8xf32>' must be the attention's result and log-sum-exp, 'tensor<2x16x8xf32>', 'tensor<2x16xf32>' (C7)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = step.attention_grad %q, %q, %q, %q saved(%q, %lse : tensor<2x16x8xf32>, tensor<2x8xf32>) : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
  return %0#0 : tensor<2x16x8xf32>
}

// -----

func.func @attention_i32(%q: tensor<16x8xi32>) -> tensor<16x8xi32> {
  // expected-error @+1 {{'step.attention' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<16x8xi32>'}}
  %0 = step.attention %q, %q, %q : tensor<16x8xi32>, tensor<16x8xi32>, tensor<16x8xi32> -> tensor<16x8xi32>
  return %0 : tensor<16x8xi32>
}

// -----

//===----------------------------------------------------------------------===//
// Parser-level errors
//===----------------------------------------------------------------------===//

func.func @parse_missing_dims_keyword(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{expected 'dims'}}
  %0 = step.broadcast_in_dim %x, [1] : tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @parse_binary_three_types(%a: tensor<4xf32>) -> tensor<4xf32> {
  // custom<SameTypes> takes one type, or one per operand.
  // expected-error @+1 {{expected operation name in quotes}}
  %0 = step.add %a, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @parse_unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{custom op 'step.neg' invalid kind of type specified}}
  %0 = step.neg %x : tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// Sizes that overflow int64 are rejected, never wrapped to a dynamic dim.
func.func @pad_c2_overflow(%x: tensor<2xf32>) -> tensor<?xf32> {
  // expected-error @+2 {{'step.pad' op dim 0: padded size overflows int64 (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = step.pad %x low = [9223372036854775806] high = [0] value = 0.0 : tensor<2xf32> -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

func.func @concat_c5_overflow(%x: tensor<4611686018427387904xf32>) -> tensor<?xf32> {
  // expected-error @+2 {{'step.concat' op the size of dim 0 overflows int64 (C5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = step.concat %x, %x dim = 0 : tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32> -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

func.func @reshape_c2_overflow(%x: tensor<4294967296x4294967296xf32>) -> tensor<0xf32> {
  // expected-error @+1 {{'step.reshape' op element count of 'tensor<4294967296x4294967296xf32>' overflows int64 (C2)}}
  %r = step.reshape %x : tensor<4294967296x4294967296xf32> -> tensor<0xf32>
  return %r : tensor<0xf32>
}

// -----

func.func @reshape_c2_dynamic_not_multiple(%x: tensor<?x4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'step.reshape' op result 'tensor<5xf32>' has 5 elements, not a multiple of the 4 elements of the static dims of operand 'tensor<?x4xf32>' (C2)}}
  %r = step.reshape %x : tensor<?x4xf32> -> tensor<5xf32>
  return %r : tensor<5xf32>
}

// -----

func.func @reshape_c3_underivable(%x: tensor<?x0xf32>) -> tensor<0x?xf32> {
  // expected-error @+1 {{'step.reshape' op the dynamic dim of result 'tensor<0x?xf32>' cannot be derived}}
  %r = step.reshape %x : tensor<?x0xf32> -> tensor<0x?xf32>
  return %r : tensor<0x?xf32>
}

// -----

func.func @pad_c3_fractional_int(%x: tensor<2xi32>) -> tensor<3xi32> {
  // expected-error @+2 {{'step.pad' op value 5.000000e-01 is not representable in 'i32' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = step.pad %x low = [1] high = [0] value = 0.5 : tensor<2xi32> -> tensor<3xi32>
  return %r : tensor<3xi32>
}

// -----

func.func @pad_c3_bool(%x: tensor<2xi1>) -> tensor<3xi1> {
  // expected-error @+2 {{'step.pad' op value 2.000000e+00 is not representable in 'i1' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = step.pad %x low = [1] high = [0] value = 2.0 : tensor<2xi1> -> tensor<3xi1>
  return %r : tensor<3xi1>
}

// -----

func.func @reduce_max_c3_empty(%x: tensor<5x0xi32>) -> tensor<5xi32> {
  // expected-error @+2 {{'step.reduce_max' op reduces over dim 1 of size 0 in 'tensor<5x0xi32>', which has no maximum (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = step.reduce_max %x dims = [1] : tensor<5x0xi32> -> tensor<5xi32>
  return %r : tensor<5xi32>
}

// -----

func.func @select_c1_names_branches(%p: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xf16>) -> tensor<2xf32> {
  // expected-error @+1 {{'step.select' op operands have different element types (C1): on_true 'tensor<2xf32>', on_false 'tensor<2xf16>'}}
  %r = step.select %p, %a, %b : tensor<2xi1>, tensor<2xf32>, tensor<2xf16>
  return %r : tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.stop_gradient
//===----------------------------------------------------------------------===//

func.func @stop_gradient_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.stop_gradient' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.stop_gradient"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

//===----------------------------------------------------------------------===//
// step.embedding_grad
//===----------------------------------------------------------------------===//

func.func @embedding_grad_c1_leading(%i: tensor<4xi64>, %g: tensor<3x8xf32>) -> tensor<5x8xf32> {
  // expected-error @+2 {{'step.embedding_grad' op grad 'tensor<3x8xf32>' must have the shape of indices 'tensor<4xi64>' plus a trailing D (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.embedding_grad %i, %g num_embeddings = 5 : tensor<4xi64>, tensor<3x8xf32> -> tensor<5x8xf32>
  return %0 : tensor<5x8xf32>
}

// -----

func.func @embedding_grad_c1_no_trailing_d(%i: tensor<4xi64>, %g: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+2 {{'step.embedding_grad' op grad 'tensor<4xf32>' must have the shape of indices 'tensor<4xi64>' plus a trailing D (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.embedding_grad"(%i, %g) <{num_embeddings = 5 : i64}> : (tensor<4xi64>, tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @embedding_grad_c2(%i: tensor<4xi64>, %g: tensor<4x8xf32>) -> tensor<0x8xf32> {
  // expected-error @+2 {{'step.embedding_grad' op num_embeddings = 0 must be >= 1 (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.embedding_grad %i, %g num_embeddings = 0 : tensor<4xi64>, tensor<4x8xf32> -> tensor<0x8xf32>
  return %0 : tensor<0x8xf32>
}

// -----

func.func @embedding_grad_result_type(%i: tensor<4xi64>, %g: tensor<4x8xf32>) -> tensor<5x8xf16> {
  // expected-error @+2 {{'step.embedding_grad' op inferred type(s) 'tensor<5x8xf32>' are incompatible with return type(s) of operation 'tensor<5x8xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.embedding_grad %i, %g num_embeddings = 5 : tensor<4xi64>, tensor<4x8xf32> -> tensor<5x8xf16>
  return %0 : tensor<5x8xf16>
}

// -----

func.func @embedding_grad_float_indices(%i: tensor<4xf32>, %g: tensor<4x8xf32>) -> tensor<5x8xf32> {
  // expected-error @+1 {{'step.embedding_grad' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = step.embedding_grad %i, %g num_embeddings = 5 : tensor<4xf32>, tensor<4x8xf32> -> tensor<5x8xf32>
  return %0 : tensor<5x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.cross_entropy_grad
//===----------------------------------------------------------------------===//

func.func @cross_entropy_grad_c1_rank(%l: tensor<10xf32>, %y: tensor<1xi64>, %g: tensor<f32>) -> tensor<10xf32> {
  // expected-error @+2 {{'step.cross_entropy_grad' op expects logits [N, C] and targets [N], found 'tensor<10xf32>' and 'tensor<1xi64>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy_grad %l, %y, %g reduction = mean : tensor<10xf32>, tensor<1xi64>, tensor<f32> -> tensor<10xf32>
  return %0 : tensor<10xf32>
}

// -----

func.func @cross_entropy_grad_c1_n(%l: tensor<4x10xf32>, %y: tensor<3xi64>, %g: tensor<f32>) -> tensor<4x10xf32> {
  // expected-error @+2 {{'step.cross_entropy_grad' op expects logits [N, C] and targets [N], found 'tensor<4x10xf32>' and 'tensor<3xi64>' (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy_grad %l, %y, %g reduction = sum : tensor<4x10xf32>, tensor<3xi64>, tensor<f32> -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @cross_entropy_grad_c2_mean_not_scalar(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<4xf32>) -> tensor<4x10xf32> {
  // expected-error @+2 {{'step.cross_entropy_grad' op grad 'tensor<4xf32>' must be a scalar of the logits' element type for logits 'tensor<4x10xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy_grad %l, %y, %g reduction = mean : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32> -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @cross_entropy_grad_c2_none_scalar(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) -> tensor<4x10xf32> {
  // expected-error @+2 {{'step.cross_entropy_grad' op grad 'tensor<f32>' must be [N] of the logits' element type for logits 'tensor<4x10xf32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy_grad %l, %y, %g reduction = none : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @cross_entropy_grad_c2_dtype(%l: tensor<4x10xbf16>, %y: tensor<4xi64>, %g: tensor<f32>) -> tensor<4x10xbf16> {
  // expected-error @+2 {{'step.cross_entropy_grad' op grad 'tensor<f32>' must be a scalar of the logits' element type for logits 'tensor<4x10xbf16>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = step.cross_entropy_grad %l, %y, %g reduction = mean : tensor<4x10xbf16>, tensor<4xi64>, tensor<f32> -> tensor<4x10xbf16>
  return %0 : tensor<4x10xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// step.check_finite
//===----------------------------------------------------------------------===//

func.func @check_finite_c1() -> tensor<i1> {
  // expected-error @+2 {{'step.check_finite' op needs at least one operand (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "step.check_finite"() : () -> tensor<i1>
  return %0 : tensor<i1>
}

// -----

func.func @check_finite_c2(%a: tensor<4xf32>, %i: tensor<3xi32>) -> tensor<i1> {
  // expected-error @+1 {{'step.check_finite' op operand #1 'tensor<3xi32>' must be a ranked f32, f16 or bf16 tensor (C2)}}
  %0 = step.check_finite %a, %i : tensor<4xf32>, tensor<3xi32>
  return %0 : tensor<i1>
}

// -----

func.func @check_finite_c2_generic(%a: tensor<4xf32>, %i: tensor<3xi1>) -> tensor<i1> {
  // expected-error @+1 {{'step.check_finite' op operand #1 must be variadic of ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<3xi1>'}}
  %0 = "step.check_finite"(%a, %i) : (tensor<4xf32>, tensor<3xi1>) -> tensor<i1>
  return %0 : tensor<i1>
}

// -----

func.func @check_finite_c3(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{'step.check_finite' op result #0 must be 0D tensor of 1-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = "step.check_finite"(%a) : (tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

//===----------------------------------------------------------------------===//
// step.sgd_update
//===----------------------------------------------------------------------===//

func.func @sgd_update_c1_grad(%p: tensor<8xf32>, %g: tensor<8xbf16>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op grad 'tensor<8xbf16>' must have the type 'tensor<8xf32>' of param (C1)}}
  %0 = step.sgd_update %p, %g, %t, %lr : (tensor<8xf32>, tensor<8xbf16>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c1_buffer(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>, %b: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op momentum_buffer 'tensor<4xf32>' must have the type 'tensor<8xf32>' of param (C1)}}
  %0:2 = step.sgd_update %p, %p, %t, %lr momentum_buffer %b {momentum = 0.9 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c2_step(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op operand #2 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0 = step.sgd_update %p, %p, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c2_lr(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<1xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op operand #3 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %0 = step.sgd_update %p, %p, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<1xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c3_no_buffer(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op has momentum = 9.000000e-01 but no momentum_buffer; the buffer is present iff momentum != 0 (C3)}}
  %0 = step.sgd_update %p, %p, %t, %lr {momentum = 0.9 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c3_unused_buffer(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op has momentum = 0.000000e+00 and momentum_buffer; the buffer is present iff momentum != 0 (C3)}}
  %0:2 = step.sgd_update %p, %p, %t, %lr momentum_buffer %p : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c4_dampening(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op nesterov needs momentum > 0 and dampening = 0 (C4)}}
  %0:2 = step.sgd_update %p, %p, %t, %lr momentum_buffer %p {momentum = 0.9 : f64, dampening = 0.1 : f64, nesterov} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @sgd_update_c4_no_momentum(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op nesterov needs momentum > 0 and dampening = 0 (C4)}}
  %0 = step.sgd_update %p, %p, %t, %lr {nesterov} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @sgd_update_negative_weight_decay(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.sgd_update' op momentum and weight_decay must be >= 0}}
  %0 = step.sgd_update %p, %p, %t, %lr {weight_decay = -1.0 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.adamw_update
//===----------------------------------------------------------------------===//

func.func @adamw_update_c1(%p: tensor<8xf32>, %m: tensor<8xf16>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.adamw_update' op failed to verify that all of {param, grad, exp_avg, exp_avg_sq} have same type}}
  %0:3 = "step.adamw_update"(%p, %p, %m, %p, %t, %lr) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf16>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @adamw_update_c2_step(%p: tensor<8xf32>, %t: tensor<1xi64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.adamw_update' op operand #4 must be 0D tensor of 64-bit signless integer values, but got 'tensor<1xi64>'}}
  %0:3 = "step.adamw_update"(%p, %p, %p, %p, %t, %lr) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<1xi64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @adamw_update_c2_lr(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<bf16>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.adamw_update' op operand #5 must be 0D tensor of 32-bit float values, but got 'tensor<bf16>'}}
  %0:3 = "step.adamw_update"(%p, %p, %p, %p, %t, %lr) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<bf16>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @adamw_update_c3_beta1(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.adamw_update' op betas (1.000000e+00, 9.990000e-01) must be in [0, 1) (C3)}}
  %0:3 = step.adamw_update %p, %p, %p, %p, %t, %lr {beta1 = 1.0 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  return %0#0 : tensor<8xf32>
}

// -----

func.func @adamw_update_c3_eps(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.adamw_update' op eps = 0.000000e+00 must be > 0 (C3)}}
  %0:3 = step.adamw_update %p, %p, %p, %p, %t, %lr {eps = 0.0 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  return %0#0 : tensor<8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.lamb_update
//===----------------------------------------------------------------------===//

func.func @lamb_update_c1(%p: tensor<8xf32>, %v: tensor<4xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.lamb_update' op failed to verify that all of {param, grad, exp_avg, exp_avg_sq} have same type}}
  %0:3 = "step.lamb_update"(%p, %p, %p, %v, %t, %lr) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @lamb_update_c2_step(%p: tensor<8xf32>, %t: tensor<f32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.lamb_update' op operand #4 must be 0D tensor of 64-bit signless integer values, but got 'tensor<f32>'}}
  %0:3 = "step.lamb_update"(%p, %p, %p, %p, %t, %lr) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %0#0 : tensor<8xf32>
}

// -----

func.func @lamb_update_c3_beta2(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.lamb_update' op betas (9.000000e-01, -5.000000e-01) must be in [0, 1) (C3)}}
  %0:3 = step.lamb_update %p, %p, %p, %p, %t, %lr {beta2 = -0.5 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  return %0#0 : tensor<8xf32>
}

// -----

func.func @lamb_update_c3_weight_decay(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.lamb_update' op weight_decay = -1.000000e-02 must be >= 0 (C3)}}
  %0:3 = step.lamb_update %p, %p, %p, %p, %t, %lr {weight_decay = -0.01 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  return %0#0 : tensor<8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.fusion
//===----------------------------------------------------------------------===//

func.func @fusion_c1(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.fusion' op C1: kind must be "loop", "reduction", "multi_tensor", "matmul", "attention" or "row_chain", found "tiles"}}
  %r = step.fusion "tiles" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = step.exp %a : tensor<4xf32>
    step.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @fusion_c2(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.fusion' op C2: body argument 0 has type 'tensor<8xf32>', input 0 has type 'tensor<4xf32>'}}
  %r = step.fusion "loop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    %e = step.exp %a : tensor<8xf32>
    %s = step.slice %e start = [0] limit = [4] strides = [1] : tensor<8xf32> -> tensor<4xf32>
    step.yield %s : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @fusion_c3(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'step.fusion' op C3: step.yield gives 1 values whose types differ from the 1 result types}}
  %r = step.fusion "loop" (%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    %e = step.exp %a : tensor<4xf32>
    step.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf16>
}

// -----

func.func @fusion_c4(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.fusion' op C4: 'step.constant' cannot be inside a fusion}}
  %r = step.fusion "loop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = step.constant dense<1.0> : tensor<4xf32>
    %e = step.add %a, %c : tensor<4xf32>
    step.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @fusion_c5_op(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'step.fusion' op C5: a loop fusion holds elementwise ops, broadcast_in_dim, reshape, iota and pad, found 'step.matmul'}}
  %r = step.fusion "loop" (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %m = step.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    step.yield %m : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}

// -----

func.func @fusion_c5_domain(%x: tensor<4xf32>, %y: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'step.fusion' op C5: result 1 has 8 elements, result 0 has 4}}
  %r:2 = step.fusion "loop" (%x, %y) : (tensor<4xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<8xf32>):
    %e = step.exp %a : tensor<4xf32>
    %f = step.exp %b : tensor<8xf32>
    step.yield %e, %f : tensor<4xf32>, tensor<8xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<8xf32>
}

// -----

func.func @fusion_c7_none(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.fusion' op C7: holds no reduce_sum, reduce_mean or reduce_max}}
  %r = step.fusion "row_chain" (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %e = step.exp %a : tensor<4x8xf32>
    step.yield %e : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @fusion_c7_leading(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'step.fusion' op C7: holds no reduce_sum, reduce_mean or reduce_max over the trailing dims}}
  %r = step.fusion "row_chain" (%x) : (tensor<4x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = step.reduce_sum %a dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
    step.yield %s : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

func.func @fusion_c7_middle(%x: tensor<4x8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'step.fusion' op C7: 'step.reduce_sum' must reduce the trailing dims of its operand (a row reduction) or its leading dims (a column reduction)}}
  %r = step.fusion "row_chain" (%x) : (tensor<4x8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%a: tensor<4x8x2xf32>):
    %s = step.reduce_sum %a dims = [1] : tensor<4x8x2xf32> -> tensor<4x2xf32>
    step.yield %s : tensor<4x2xf32>
  }
  return %r : tensor<4x2xf32>
}

// -----

func.func @fusion_c7_column_read(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'step.fusion' op C7: 'step.neg' reads a column reduction's result (those are only yielded)}}
  %r:2 = step.fusion "row_chain" (%x) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %m = step.reduce_max %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %c = step.reduce_sum %a dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
    %n = step.neg %c : tensor<8xf32>
    step.yield %m, %n : tensor<4xf32>, tensor<8xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<8xf32>
}

// -----

func.func @fusion_c7_column_rows(%x: tensor<4x8xf32>, %y: tensor<2x2x8xf32>) -> (tensor<4xf32>, tensor<2x8xf32>) {
  // expected-error @+1 {{'step.fusion' op C7: 'step.reduce_sum' reduces tensor<2x2x8xf32> over 1 leading dims; a column reduction reads one element per element of the reductions' operand (32) over dims holding one row each (4)}}
  %r:2 = step.fusion "row_chain" (%x, %y) : (tensor<4x8xf32>, tensor<2x2x8xf32>) -> (tensor<4xf32>, tensor<2x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<2x2x8xf32>):
    %m = step.reduce_max %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %c = step.reduce_sum %b dims = [0] : tensor<2x2x8xf32> -> tensor<2x8xf32>
    step.yield %m, %c : tensor<4xf32>, tensor<2x8xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<2x8xf32>
}

// -----

func.func @fusion_c7_shapes(%x: tensor<4x8xf32>, %y: tensor<4x2x4xf32>) -> (tensor<4xf32>, tensor<4x2xf32>) {
  // expected-error @+1 {{'step.fusion' op C7: 'step.reduce_sum' reads tensor<4x2x4xf32> over 1 trailing dims; the chain's first reduction reads the same shape over the same dims}}
  %r:2 = step.fusion "row_chain" (%x, %y) : (tensor<4x8xf32>, tensor<4x2x4xf32>) -> (tensor<4xf32>, tensor<4x2xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x2x4xf32>):
    %s = step.reduce_sum %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %t = step.reduce_sum %b dims = [2] : tensor<4x2x4xf32> -> tensor<4x2xf32>
    step.yield %s, %t : tensor<4xf32>, tensor<4x2xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4x2xf32>
}

// -----

func.func @fusion_c7_column_broadcast(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'step.fusion' op C7: 'step.broadcast_in_dim' must broadcast a per-row value over its row (to the reductions' operand shape, row dims in order), found tensor<8xf32> -> tensor<8x8xf32>}}
  %r = step.fusion "row_chain" (%x) : (tensor<8x8xf32>) -> tensor<8x8xf32> {
  ^bb0(%a: tensor<8x8xf32>):
    %s = step.reduce_sum %a dims = [1] : tensor<8x8xf32> -> tensor<8xf32>
    %b = step.broadcast_in_dim %s, dims = [1] : tensor<8xf32> -> tensor<8x8xf32>
    %d = step.sub %a, %b : tensor<8x8xf32>
    step.yield %d : tensor<8x8xf32>
  }
  return %r : tensor<8x8xf32>
}

// -----

func.func @fusion_c7_result(%x: tensor<4x8xf32>, %y: tensor<5xf32>) -> (tensor<4xf32>, tensor<5xf32>) {
  // expected-error @+1 {{'step.fusion' op C7: result 1 (tensor<5xf32>) has neither one element per row (4) nor one per element of the reductions' operand (32)}}
  %r:2 = step.fusion "row_chain" (%x, %y) : (tensor<4x8xf32>, tensor<5xf32>) -> (tensor<4xf32>, tensor<5xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<5xf32>):
    %s = step.reduce_sum %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %e = step.exp %b : tensor<5xf32>
    step.yield %s, %e : tensor<4xf32>, tensor<5xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<5xf32>
}

// -----

func.func @fusion_c7_row_size(%x: tensor<4x8xf32>, %n: tensor<4x8xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.fusion' op C7: 'step.dropout' computes 32 elements from per-row values, expected one per row (1)}}
  %r = step.fusion "row_chain" (%x, %n) : (tensor<4x8xf32>, tensor<4x8xi64>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xi64>):
    %s = step.reduce_sum %b dims = [0, 1] : tensor<4x8xi64> -> tensor<i64>
    %d = step.dropout %a offset %s p = 5.000000e-01 seed = 3 : tensor<4x8xf32>, tensor<i64>
    step.yield %d : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @fusion_c7_dynamic(%x: tensor<?x8xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'step.fusion' op C7: 'step.reduce_sum' has a result of dynamic shape (tensor<?xf32>); a row chain needs static shapes}}
  %r = step.fusion "row_chain" (%x) : (tensor<?x8xf32>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = step.reduce_sum %a dims = [1] : tensor<?x8xf32> -> tensor<?xf32>
    step.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}

// -----

func.func @fusion_c7_row_op(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'step.fusion' op C7: 'step.layer_norm' cannot be in a row_chain fusion (elementwise ops, broadcast_in_dim, reshape, iota and reduce_* only)}}
  %r = step.fusion "row_chain" (%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %y = step.layer_norm %a, %b, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
    step.yield %y : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @yield_parent(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.yield' op expects parent op 'step.fusion'}}
  step.yield %x : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// step.offload, step.reload
//===----------------------------------------------------------------------===//

func.func @offload_c1(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{'step.offload' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %h = "step.offload"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  %y = step.reload %h : tensor<4xf16>
  return %y : tensor<4xf16>
}

// -----

func.func @offload_c2(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.offload' op C2: the host value may only be read by step.reload, step.host ops and a function's return, found a use by 'step.exp'}}
  %h = step.offload %x : tensor<4xf32>
  %y = step.exp %h : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @offload_c2_twice(%x: tensor<4xf32>) {
  // expected-error @+1 {{'step.offload' op C2: the host value may only be read by step.reload, step.host ops and a function's return, found a use by 'step.offload'}}
  %h = step.offload %x : tensor<4xf32>
  %h2 = step.offload %h : tensor<4xf32>
  %y = step.reload %h2 : tensor<4xf32>
  return
}

// -----

func.func @offload_in_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.fusion' op C5: a loop fusion holds elementwise ops, broadcast_in_dim, reshape, iota and pad, found 'step.offload'}}
  %r = step.fusion "loop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %h = step.offload %a : tensor<4xf32>
    %b = step.reload %h : tensor<4xf32>
    step.yield %b : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @reload_c2(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'step.reload' op C2: the operand must be a host value (the result of step.offload or of a step.host op, or a step.memory = "host" argument)}}
  %y = step.reload %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// Collectives (StepDistOps.td)
//===----------------------------------------------------------------------===//

// -----

func.func @all_reduce_c1_size(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.all_reduce' op replica_groups lists 3 replicas, expected a positive multiple of group_size = 2 (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_reduce %x {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1, 2>} : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @all_reduce_c1_repeat(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.all_reduce' op replica_groups must list 0..1 once each, found 0 (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_reduce %x {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 0>} : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @all_reduce_c1_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'step.all_reduce' op group_size = 0 must be >= 1 (C1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_reduce %x {group_size = 0 : i64, reduce = "sum", replica_groups = array<i64: 0>} : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @all_reduce_c2(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+2 {{'step.all_reduce' op reduce = "mean" needs a float operand, found 'tensor<4xi32>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_reduce %x {group_size = 1 : i64, reduce = "mean", replica_groups = array<i64: 0>} : tensor<4xi32> -> tensor<4xi32>
  return %y : tensor<4xi32>
}

// -----

func.func @reduce_scatter_c2(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{'step.reduce_scatter' op reduce = "max" must be sum or mean (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.reduce_scatter %x {group_size = 2 : i64, reduce = "max", replica_groups = array<i64: 0, 1>} : tensor<4xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @reduce_scatter_c3(%x: tensor<5xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{'step.reduce_scatter' op dim 0 of 'tensor<5xf32>' must be divisible by group_size = 2 (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.reduce_scatter %x {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>} : tensor<5xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @all_gather_c3(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{'step.all_gather' op needs an operand of rank >= 1 with a static dim 0, found 'tensor<f32>' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_gather %x {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<f32> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @all_gather_result(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{'step.all_gather' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_gather %x {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<2xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @local_shard_c3(%x: tensor<?xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{'step.local_shard' op needs a static operand shape, found 'tensor<?xf32>' (C3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.local_shard %x {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<?xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @all_reduce_c2_i1_sum(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+2 {{'step.all_reduce' op reduce = "sum" of i1 is not defined (max or min are), found 'tensor<4xi1>' (C2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = step.all_reduce %x {group_size = 1 : i64, reduce = "sum", replica_groups = array<i64: 0>} : tensor<4xi1> -> tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @attention_fusion_extra_op(%x: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  // expected-error @+1 {{'step.fusion' op C6: an attention fusion holds one attention op and slice, transpose, reshape and concat ops, found 'step.neg'}}
  %r = step.fusion "attention"(%x) : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  ^bb0(%a: tensor<2x16x16xf32>):
    %n = step.neg %a : tensor<2x16x16xf32>
    %o = step.attention %n, %n, %n : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
    step.yield %o : tensor<2x16x16xf32>
  }
  return %r : tensor<2x16x16xf32>
}

// -----

func.func @attention_fusion_none(%x: tensor<2x16x16xf32>) -> tensor<16x2x16xf32> {
  // expected-error @+1 {{'step.fusion' op C6: an attention fusion holds no attention op}}
  %r = step.fusion "attention"(%x) : (tensor<2x16x16xf32>) -> tensor<16x2x16xf32> {
  ^bb0(%a: tensor<2x16x16xf32>):
    %t = step.transpose %a, perm = [1, 0, 2] : tensor<2x16x16xf32> -> tensor<16x2x16xf32>
    step.yield %t : tensor<16x2x16xf32>
  }
  return %r : tensor<16x2x16xf32>
}

// -----

func.func @attention_fusion_column_view(%x: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  // expected-error @+1 {{'step.fusion' op C6: attention operand 1 does not have unit innermost stride}}
  %r = step.fusion "attention"(%x) : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  ^bb0(%a: tensor<2x16x16xf32>):
    %k = step.transpose %a, perm = [0, 2, 1] : tensor<2x16x16xf32> -> tensor<2x16x16xf32>
    %o = step.attention %a, %k, %a : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
    step.yield %o : tensor<2x16x16xf32>
  }
  return %r : tensor<2x16x16xf32>
}

// -----

func.func @attention_fusion_result_used_twice(%x: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  // expected-error @+1 {{'step.fusion' op C6: attention result 0 does not reach its own fusion result (or window of a concatenation) through transposes and reshapes}}
  %r = step.fusion "attention"(%x) : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  ^bb0(%a: tensor<2x16x16xf32>):
    %o = step.attention %a, %a, %a : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
    %t = step.transpose %o, perm = [1, 0, 2] : tensor<2x16x16xf32> -> tensor<16x2x16xf32>
    step.yield %o : tensor<2x16x16xf32>
  }
  return %r : tensor<2x16x16xf32>
}

// -----

func.func @attention_fusion_concat_of_an_input(%x: tensor<2x16x16xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{'step.fusion' op C6: fusion result 0 is written by 1 attention results, expected 2 (one, or one per input of the concatenation it yields)}}
  %r = step.fusion "attention"(%x) : (tensor<2x16x16xf32>) -> tensor<2x16x32xf32> {
  ^bb0(%a: tensor<2x16x16xf32>):
    %o = step.attention %a, %a, %a : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
    %c = step.concat %o, %a dim = 2 : tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x32xf32>
    step.yield %c : tensor<2x16x32xf32>
  }
  return %r : tensor<2x16x32xf32>
}

// -----

func.func @attention_fusion_result_twice(%x: tensor<2x16x16xf32>) -> (tensor<2x16x16xf32>, tensor<2x16x16xf32>) {
  // expected-error @+1 {{'step.fusion' op C6: fusion result 1 is written by 0 attention results, expected 1 (one, or one per input of the concatenation it yields)}}
  %r:2 = step.fusion "attention"(%x) : (tensor<2x16x16xf32>) -> (tensor<2x16x16xf32>, tensor<2x16x16xf32>) {
  ^bb0(%a: tensor<2x16x16xf32>):
    %o = step.attention %a, %a, %a : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
    step.yield %o, %a : tensor<2x16x16xf32>, tensor<2x16x16xf32>
  }
  return %r#0, %r#1 : tensor<2x16x16xf32>, tensor<2x16x16xf32>
}

// -----

func.func @attention_fusion_valid_view(%x: tensor<2x16x16xf32>, %l: tensor<1xi64>) -> tensor<2x16x16xf32> {
  // expected-error @+1 {{'step.fusion' op C6: attention operand 3 must be an input as it is}}
  %r = step.fusion "attention"(%x, %l) : (tensor<2x16x16xf32>, tensor<1xi64>) -> tensor<2x16x16xf32> {
  ^bb0(%a: tensor<2x16x16xf32>, %b: tensor<1xi64>):
    %s = step.reshape %b : tensor<1xi64> -> tensor<i64>
    %o = step.attention %a, %a, %a valid %s : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<i64> -> tensor<2x16x16xf32>
    step.yield %o : tensor<2x16x16xf32>
  }
  return %r : tensor<2x16x16xf32>
}

// -----

func.func @fusion_c7_column_wide(%x: tensor<4x2048xf32>) -> (tensor<4xf32>, tensor<2048xf32>) {
  // expected-error @+1 {{'step.fusion' op C7: 'step.reduce_sum' is a column reduction of rows of 2048 elements; at most 1024 (a warp a row)}}
  %r:2 = step.fusion "row_chain" (%x) : (tensor<4x2048xf32>) -> (tensor<4xf32>, tensor<2048xf32>) {
  ^bb0(%a: tensor<4x2048xf32>):
    %m = step.reduce_max %a dims = [1] : tensor<4x2048xf32> -> tensor<4xf32>
    %c = step.reduce_sum %a dims = [0] : tensor<4x2048xf32> -> tensor<2048xf32>
    step.yield %m, %c : tensor<4xf32>, tensor<2048xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<2048xf32>
}

// -----

// Column sums live in shared memory (8 warps x 1024 columns x 4 bytes
// each): four column reductions of 1024 columns take 128 KiB, over C7's
// 96 KiB.
func.func @fusion_c7_column_shared_bytes(%x: tensor<4x1024xf32>) -> (tensor<4xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>) {
  // expected-error @+1 {{'step.fusion' op C7: has 4 column reductions of 1024 columns; their sums would take 131072 bytes of shared memory, at most 98304}}
  %r:5 = step.fusion "row_chain" (%x) : (tensor<4x1024xf32>) -> (tensor<4xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>) {
  ^bb0(%a: tensor<4x1024xf32>):
    %m = step.reduce_max %a dims = [1] : tensor<4x1024xf32> -> tensor<4xf32>
    %e = step.exp %a : tensor<4x1024xf32>
    %n = step.neg %a : tensor<4x1024xf32>
    %q = step.mul %a, %a : tensor<4x1024xf32>
    %c1 = step.reduce_sum %a dims = [0] : tensor<4x1024xf32> -> tensor<1024xf32>
    %c2 = step.reduce_sum %e dims = [0] : tensor<4x1024xf32> -> tensor<1024xf32>
    %c3 = step.reduce_sum %n dims = [0] : tensor<4x1024xf32> -> tensor<1024xf32>
    %c4 = step.reduce_sum %q dims = [0] : tensor<4x1024xf32> -> tensor<1024xf32>
    step.yield %m, %c1, %c2, %c3, %c4 : tensor<4xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<4xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>
}
