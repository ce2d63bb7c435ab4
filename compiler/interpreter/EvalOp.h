//===- EvalOp.h - One step op on the reference kernels ----------*- C++ -*-===//
#ifndef STEP_COMPILER_INTERPRETER_EVALOP_H
#define STEP_COMPILER_INTERPRETER_EVALOP_H

#include "runtime/Tensor.h"

#include "mlir/IR/Operation.h"

#include <vector>

namespace step {

/// Evaluates one step op on host tensors (its operands, in order) and returns
/// its results. Throws rt::Error for run-time failures (bad index, shape
/// mismatch) and for ops the interpreter does not know.
std::vector<rt::HostTensor> evalStepOp(mlir::Operation &op,
                                       const std::vector<rt::HostTensor> &in);

} // namespace step

#endif // STEP_COMPILER_INTERPRETER_EVALOP_H
