//===- Passes.h - StepJIT passes --------------------------------*- C++ -*-===//
#ifndef STEP_PASSES_PASSES_H
#define STEP_PASSES_PASSES_H

#include "dialects/step/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::step {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Kernel fusion as every pipeline runs it: step-fuse-attention (attention
/// reads its heads in place), step-fuse, step-fuse-loss (a loss and its
/// gradient in one kernel), step-fuse-row-chains (row reductions that
/// feed one another, and their loop, in one kernel), then
/// step-fuse-loop-reductions (a loop and the reductions of its results in
/// one kernel).
/// `geluEpilogues`: step-fuse's gelu-epilogues option.
void addFusionPasses(OpPassManager &pm, bool geluEpilogues = false);

} // namespace mlir::step

#endif // STEP_PASSES_PASSES_H
