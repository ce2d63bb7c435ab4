//===- MemoryPlan.h - The arena plan as a function --------------*- C++ -*-===//
//
// The algorithm of step-memory-plan (MemoryPlan.cpp) for passes that must
// check a candidate function against the real plan (step-remat does, for
// every choice it weighs) without running a pass manager.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_MEMORYPLAN_H
#define STEP_PASSES_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace mlir::step {

struct ArenaPlan {
  int64_t peak = 0;    ///< step.arena_bytes: the planned peak
  int64_t noReuse = 0; ///< step.arena_bytes_no_reuse
  int64_t host = 0;    ///< step.host_bytes: the host arena (step.offload)
};

/// Plans the transient values of `f` (one block) with byte `alignment` (a
/// power of two), and the results of step.offload and of `step.host` ops
/// in a host arena of their own. With `annotate`, writes step.offsets on every op, the two
/// step.arena_bytes* attributes and step.host_bytes on `f`, exactly as
/// step-memory-plan.
/// Fails (with an error on the op) on a result of non-static type.
FailureOr<ArenaPlan> planArena(func::FuncOp f, int64_t alignment,
                               bool annotate);

struct FusionChoices;

/// The plan of a candidate function (step-remat and step-offload weigh
/// each choice by it): `copy`, alone in a scratch module that nothing else
/// reads, after the fusion passes as the pipeline runs them (when `fuse`),
/// planned by planArena. Builds without assertions skip the verifier
/// between those passes (a third of --remat max's compile time): the
/// pipeline verifies the function it keeps after the same passes.
FailureOr<ArenaPlan> planCandidate(func::FuncOp copy, bool fuse,
                                   const FusionChoices &choices,
                                   int64_t alignment);

/// `step.donated` (compiler/pipeline/Donation.cpp): the results of `op`
/// written into a function argument's buffer, result index -> argument
/// number. The memory plan gives them no arena bytes (offset -1).
std::map<int64_t, int64_t> donatedArguments(Operation *op);
/// Sets `op`'s step.donated to `pairs`; empty: removes it.
void setDonatedArguments(Operation *op,
                         const std::map<int64_t, int64_t> &pairs);

} // namespace mlir::step

#endif // STEP_PASSES_MEMORYPLAN_H
