//===- StepOps.td - Ops of the step dialect -------------------*- tablegen -*-===//
//
// Each op documents its semantics (the PyTorch function it matches), its
// dtype rules, and its constraints as a numbered list (C1, C2, ...); negative
// lit tests in tests/lit/dialect/step/invalid.mlir are named after them.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_OPS_TD
#define STEP_OPS_TD

include "dialects/step/StepBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

/// The result type equals the first operand's type.
class Step_SameAsFirstOperandInference {
  code inferDecl = [{
    static ::mlir::LogicalResult inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location>,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      inferred.push_back(operands[0].getType());
      return ::mlir::success();
    }
  }];
}

include "dialects/step/StepElementwiseOps.td"
include "dialects/step/StepShapeOps.td"
include "dialects/step/StepNNOps.td"
include "dialects/step/StepTrainOps.td"
include "dialects/step/StepStructureOps.td"
include "dialects/step/StepDistOps.td"

#endif // STEP_OPS_TD
