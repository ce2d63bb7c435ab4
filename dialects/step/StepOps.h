//===- StepOps.h - The step dialect and its ops -----------------*- C++ -*-===//
#ifndef STEP_DIALECTS_STEP_STEPOPS_H
#define STEP_DIALECTS_STEP_STEPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/step/TypeInference.h"

#include "dialects/step/StepEnums.h.inc"

#include "dialects/step/StepDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/step/StepOps.h.inc"

namespace mlir::step {

/// Whether `v` lives in host memory (docs/dialect.md, "Memory placement"):
/// the result of a `step.offload` or of an op marked `step.host`, or an
/// argument of a function whose `step.memory` argument attribute is
/// "host".
bool isHostValue(Value v);

/// Whether `op` may carry `step.host` (run on the host CPU): not a copy
/// between memories, not a collective, not a rank's `local_shard`.
bool mayRunOnHost(Operation *op);

} // namespace mlir::step

#endif // STEP_DIALECTS_STEP_STEPOPS_H
