//===- Executor.h - Runs an execution plan on the CPU kernels ---*- C++ -*-===//
//
// The CPU reference backend: interprets the steps of a Plan with the kernels
// of runtime/cpu, mapping each PlanStep's op name and JSON attributes to a
// kernel as compiler/interpreter/EvalOp.cpp maps MLIR ops.
//
// It runs the same plan the GPU runs, memory plan included: every Transient
// buffer lives at its offset in one arena of plan.arenaBytes bytes, so kernel
// results are copied into their slots and operands read back from them. Two
// transients whose lifetimes overlap but share bytes corrupt each other here
// as they would on the device, and the CPU result exposes the bug.
//
// Nothing is trusted: argument dtypes and shapes, buffer ids, arena and
// constant ranges, operand counts, attribute types and every kernel result
// against its buffer are checked, and a violation throws rt::Error naming the
// step index, the op and the buffer. Deterministic: the same inputs give the
// same bits. One thread runs the compute steps (OpenBLAS has its own); a
// sharded plan's collectives run on a second one, overlapping them
// (ExecuteOptions::overlapCollectives).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CPU_EXECUTOR_H
#define STEP_RUNTIME_CPU_EXECUTOR_H

#include "runtime/Artifact.h"
#include "runtime/Profile.h"

#include <functional>
#include <vector>

namespace step::rt::cpu {

/// What an observer sees after one op has run: the op, the values it read
/// and the values it produced (before they are stored). Inside a fusion the
/// fused ops are seen one by one, each with `plan` its fusion's body, and
/// then the fusion step itself.
struct StepEvent {
  const Plan &plan;    ///< the artifact's plan, or the body of a fusion
  const PlanStep &step;
  size_t index;        ///< of `step` in plan.steps
  /// The enclosing fusion's index in the artifact's plan; -1 at top level.
  int64_t fusion;
  const std::vector<HostTensor> &operands, &results;
};
using StepObserver = std::function<void(const StepEvent &)>;

struct ExecuteOptions {
  /// Runs the collective steps on a thread of their own, in plan order,
  /// while this thread runs the compute steps; each is joined before the
  /// first step that needs it (rt::collectiveSchedule). Only with a
  /// communicator of more than one rank that allows it (anyThread()) and
  /// no observer. The results are the same bits either way.
  bool overlapCollectives = true;
  /// Called after every step and every fused op (operands are then kept as
  /// copies for it); collectives then run in place.
  StepObserver observer;
  /// When set, receives when each step ran (runtime/Profile.h): compute
  /// steps on Lane::Compute (host steps on Lane::Host), collectives on
  /// Lane::Collective (overlapped ones timed on their thread). Two clock
  /// reads per step.
  RunTimeline *timeline = nullptr;
};

/// Runs `artifact.plan`. `args` are the values of plan.arguments, in order;
/// constants come from the artifact's "constants" section. Returns the values
/// of plan.results, in order. `args` are never modified.
std::vector<HostTensor> execute(const Artifact &artifact,
                                const std::vector<HostTensor> &args);

/// As above, without copying the arguments (none may be null). With an
/// `observer` it is called after every step and every fused op (operands
/// are then kept as copies for it); without one nothing is copied.
std::vector<HostTensor> execute(const Artifact &artifact,
                                const std::vector<const HostTensor *> &args,
                                const StepObserver &observer = nullptr);
std::vector<HostTensor> execute(const Artifact &artifact,
                                const std::vector<const HostTensor *> &args,
                                const ExecuteOptions &options);

} // namespace step::rt::cpu

#endif // STEP_RUNTIME_CPU_EXECUTOR_H
