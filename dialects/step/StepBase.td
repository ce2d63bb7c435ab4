//===- StepBase.td - The step dialect, base class and types -*- tablegen -*-===//
//
// The `step` dialect describes a deep-learning training step on tensors.
// Shapes are exact (broadcasting is explicit), semantics follow PyTorch where
// a name matches, and every op is defined for f32/f16/bf16 (and integers and
// i1 where stated).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_BASE_TD
#define STEP_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Step_Dialect : Dialect {
  let name = "step";
  let cppNamespace = "::mlir::step";
  let summary = "Tensor ops of a deep-learning training step";
  let description = [{
    The `step` dialect holds the forward pass, backward pass and optimizer
    update of a training step as one graph of tensor ops on builtin ranked
    `tensor` types with element types `f32`, `f16`, `bf16`, `i32`, `i64` and
    `i1`. Ops take exact shapes: broadcasting is an explicit
    `step.broadcast_in_dim`. Dimensions may be dynamic (`?`) until
    `step-pad-dynamic` makes them static.
  }];
  let hasConstantMaterializer = 1;
  // `step.host` (an op computed on the host CPU) is checked where it is set.
  let hasOperationAttrVerify = 1;
  // `step.memory` on function arguments and results.
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Step_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Step_IntTensor : RankedTensorOf<[I32, I64]>;
def Step_NumTensor : RankedTensorOf<[F32, F16, BF16, I32, I64]>;
def Step_Tensor : RankedTensorOf<[F32, F16, BF16, I32, I64, I1]>;
def Step_BoolTensor : RankedTensorOf<[I1]>;
def Step_F32Scalar : 0DTensorOf<[F32]>;
def Step_I64Scalar : 0DTensorOf<[I64]>;

//===----------------------------------------------------------------------===//
// Enums (printed as bare words: `step.compare lt, ...`)
//===----------------------------------------------------------------------===//

def Step_ComparisonDirection : I32EnumAttr<"ComparisonDirection",
    "comparison direction of step.compare", [
      I32EnumAttrCase<"EQ", 0, "eq">, I32EnumAttrCase<"NE", 1, "ne">,
      I32EnumAttrCase<"LT", 2, "lt">, I32EnumAttrCase<"LE", 3, "le">,
      I32EnumAttrCase<"GT", 4, "gt">, I32EnumAttrCase<"GE", 5, "ge">]> {
  let cppNamespace = "::mlir::step";
}

def Step_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation of step.gelu (PyTorch's `approximate`)", [
      I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::mlir::step";
}

def Step_LossReduction : I32EnumAttr<"LossReduction",
    "reduction of a loss (PyTorch's `reduction`)", [
      I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Mean", 1, "mean">,
      I32EnumAttrCase<"Sum", 2, "sum">]> {
  let cppNamespace = "::mlir::step";
}

//===----------------------------------------------------------------------===//
// Base op class
//===----------------------------------------------------------------------===//

class Step_Op<string mnemonic, list<Trait> traits = []>
    : Op<Step_Dialect, mnemonic, traits>;

#endif // STEP_BASE_TD
