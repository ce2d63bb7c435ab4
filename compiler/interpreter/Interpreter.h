//===- Interpreter.h - Reference interpreter of the step dialect -*- C++ -*-===//
//
// Runs a func.func of step ops on the CPU, op by op, with the runtime's
// reference kernels (runtime/cpu/Kernels.h): the interpreter owns only the
// mapping from ops to kernels, never the math. Deterministic: the same inputs
// give the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_INTERPRETER_INTERPRETER_H
#define STEP_COMPILER_INTERPRETER_INTERPRETER_H

#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>
#include <string>
#include <vector>

namespace step {

/// The runtime element type of an MLIR element type, or nullopt when the
/// step dialect does not support it.
std::optional<rt::DType> toDType(mlir::Type elementType);

/// The element type `dtype` spelled as an MLIR type.
mlir::Type toMlirType(rt::DType dtype, mlir::MLIRContext *ctx);

/// A dense elements attribute as a host tensor.
rt::HostTensor fromElementsAttr(mlir::DenseElementsAttr attr);

/// The name of argument `i` of `func`: its `step.name` attribute, else "argI".
std::string argumentName(mlir::func::FuncOp func, unsigned i);
/// The name of result `i`: its `step.name` result attribute, else "resultI".
std::string resultName(mlir::func::FuncOp func, unsigned i);

/// Checks that `value` fits the function argument type `type` (dtype, rank,
/// static dims) and throws rt::Error naming `what` otherwise.
void checkArgument(const rt::HostTensor &value, mlir::Type type,
                   const std::string &what);

/// Runs `func` on `args`. Errors are emitted as MLIR diagnostics at the
/// offending op (or the function) and the result is a failure.
mlir::FailureOr<std::vector<rt::HostTensor>>
interpret(mlir::func::FuncOp func, const std::vector<rt::HostTensor> &args);

} // namespace step

#endif // STEP_COMPILER_INTERPRETER_INTERPRETER_H
