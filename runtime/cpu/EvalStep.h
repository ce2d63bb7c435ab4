//===- EvalStep.h - One plan step on its CPU reference kernel ---*- C++ -*-===//
//
// The runtime twin of compiler/interpreter/EvalOp.cpp: maps a PlanStep's op
// name and JSON attributes (the op's ODS names; absent keys take the ODS
// defaults) to a kernel of runtime/cpu and runs it. Memory is the caller's
// business (runtime/cpu/Executor.h).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CPU_EVALSTEP_H
#define STEP_RUNTIME_CPU_EVALSTEP_H

#include "runtime/Plan.h"

#include <functional>
#include <string>
#include <vector>

namespace step::rt::cpu {

/// Called after each op of a fusion body runs: the body, the op's index in
/// it, its operands and its results.
using FusedOpObserver =
    std::function<void(const Plan &body, size_t index,
                       const std::vector<HostTensor> &operands,
                       const std::vector<HostTensor> &results)>;

/// Runs `step` of `plan` on `operands` (the values of step.operands) and
/// returns one tensor per step.results. The result buffers give cast its
/// dtype, reshape and broadcast_in_dim their shape, iota both. Throws Error
/// for an unknown op, a wrong operand count, a missing or mistyped attribute
/// (naming the op and the key) and whatever the kernel rejects. A fusion
/// calls `inside` (when given) after each of its ops.
std::vector<HostTensor> evalStep(const Plan &plan, const PlanStep &step,
                                 std::vector<HostTensor> operands,
                                 const FusedOpObserver *inside = nullptr);

/// Op names with a kernel, sorted ("step.abs", ...).
std::vector<std::string> supportedOps();

} // namespace step::rt::cpu

#endif // STEP_RUNTIME_CPU_EVALSTEP_H
