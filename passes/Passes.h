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

/// The cuBLASLt epilogues a pipeline asks of the fusion passes beyond the
/// default ones (both off until run on a GPU; docs/fusion.md).
struct FusionChoices {
  /// step-fuse's gelu-epilogues option (GELU_AUX_BIAS, DGELU_BGRAD).
  bool geluEpilogues = false;
  /// Run step-fuse-bias-grad (BGRADA/BGRADB).
  bool bgradEpilogues = false;
};

/// Kernel fusion as every pipeline runs it: step-fuse-attention (attention
/// reads its heads in place), when chosen step-fuse-bias-grad (a bias
/// gradient no generated kernel makes on the way in its weight gradient's
/// cuBLASLt call), step-fuse, step-fuse-loss (a loss and its gradient in
/// one kernel), step-fuse-row-chains (row reductions that feed one
/// another, and their loop, in one kernel), then step-fuse-loop-reductions
/// (a loop and the reductions of its results in one kernel).
void addFusionPasses(OpPassManager &pm, const FusionChoices &choices = {});

} // namespace mlir::step

#endif // STEP_PASSES_PASSES_H
