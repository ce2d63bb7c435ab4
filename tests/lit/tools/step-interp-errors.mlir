// Bad input to step-interp: a diagnostic naming the place, exit code 1.

// RUN: split-file %s %t
// RUN: not step-interp %t/ill-typed.mlir --inputs %t --out %t/out 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not step-interp %t/malformed.mlir --inputs %t --out %t/out 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not step-interp %t/ok.mlir --func=nope --inputs %t --out %t/out 2>&1 | FileCheck %s --check-prefix=FUNC
// RUN: not step-interp %t/ok.mlir --inputs %t/no-such-dir --out %t/out 2>&1 | FileCheck %s --check-prefix=INPUT
// RUN: not step-interp %t/missing-file.mlir --inputs %t --out %t/out 2>&1 | FileCheck %s --check-prefix=FILE
// RUN: not step-interp %t/unsupported.mlir --inputs %t --out %t/out 2>&1 | FileCheck %s --check-prefix=OP
// RUN: not step-interp 2>&1 | FileCheck %s --check-prefix=USAGE

// TYPE: ill-typed.mlir:2:8: error: 'step.add' op dimension 1 differs (C2): lhs 'tensor<2x3xf32>' has 3, rhs 'tensor<2x4xf32>' has 4
// SYNTAX: malformed.mlir:2:{{[0-9]+}}: error:
// FUNC: no function @nope
// INPUT: missing input for argument 0: {{.*}}no-such-dir/x.npy
// FILE: missing-file.mlir
// OP: unsupported.mlir:2:8: error: the interpreter does not support 'arith.constant'
// USAGE: file is required

//--- ill-typed.mlir
func.func @forward(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %0 = "step.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

//--- malformed.mlir
func.func @forward(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = step.add %a, : tensor<2xf32>
  return %0 : tensor<2xf32>
}

//--- ok.mlir
func.func @forward(%a: tensor<2xf32> {step.name = "x"}) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}

//--- unsupported.mlir
func.func @forward() -> tensor<2xf32> {
  %c = arith.constant dense<1.0> : tensor<2xf32>
  %0 = arith.addf %c, %c : tensor<2xf32>
  return %0 : tensor<2xf32>
}
