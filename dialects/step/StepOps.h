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

#endif // STEP_DIALECTS_STEP_STEPOPS_H
