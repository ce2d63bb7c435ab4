//===- StepAttrs.h - The model contract's attributes, for passes -*- C++ -*-===//
//
// Readers of the `step.kind` / `step.name` argument and result attributes of
// the model-file contract (DESIGN.md section 3), shared by the training
// passes.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_STEPATTRS_H
#define STEP_PASSES_STEPATTRS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::step {

/// The step.name of step-optimizer's guard-finite result (the runtime's
/// rt::kGuardResult, runtime/FiniteGuard.h).
inline constexpr const char *kGuardResult = "guard.finite";

/// The string attribute `key` of `dict`, or "" when absent.
inline StringRef stringAttrOf(DictionaryAttr dict, StringRef key) {
  auto s = dict ? dict.getAs<StringAttr>(key) : StringAttr();
  return s ? s.getValue() : StringRef();
}

/// step.kind of argument `i` ("param", "input", "state"), or "".
inline StringRef argKind(func::FuncOp f, unsigned i) {
  return stringAttrOf(f.getArgAttrDict(i), "step.kind");
}

/// step.kind of result `r` ("grad", ...), or "".
inline StringRef resultKind(func::FuncOp f, unsigned r) {
  return stringAttrOf(f.getResultAttrDict(r), "step.kind");
}

/// step.name of argument `i`, else "argI" (the interpreter's file name).
inline std::string argName(func::FuncOp f, unsigned i) {
  StringRef name = stringAttrOf(f.getArgAttrDict(i), "step.name");
  return name.empty() ? "arg" + std::to_string(i) : name.str();
}

} // namespace mlir::step

#endif // STEP_PASSES_STEPATTRS_H
