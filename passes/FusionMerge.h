//===- FusionMerge.h - Cloning ops and fusions into a new fusion -*- C++
//-*-===//
//
// Shared by the passes that merge already-formed units (a bare op or a
// step.fusion) into one step.fusion: step-fuse-loss, step-fuse-row-chains,
// step-fuse-loop-reductions.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_FUSIONMERGE_H
#define STEP_PASSES_FUSIONMERGE_H

#include "dialects/step/StepOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::step {

/// Bytes of a tensor type; INT64_MAX when it has no static size (so a
/// byte budget refuses it).
int64_t staticBytes(Type type);

/// A new fusion of kind `kind` before `at` holding clones of `members`
/// (units in program order): its inputs are the members' operands that no
/// member makes (once each, in order), its results the members' results
/// for which `yield` holds (in order). The members stay; the caller
/// replaces their uses and erases them, or erases the new fusion.
FusionOp mergeUnits(ArrayRef<Operation *> members, Operation *at,
                    StringRef kind, llvm::function_ref<bool(Value)> yield);

/// Replaces `members` (units in program order, one block) by one fusion
/// of kind `kind` before `at`: mergeUnits yielding the members' results
/// that an op outside them reads, its body cleaned by CSE, those uses
/// redirected to it, the members erased. Returns the fusion.
FusionOp fuseUnits(ArrayRef<Operation *> members, Operation *at,
                   StringRef kind);

} // namespace mlir::step

#endif // STEP_PASSES_FUSIONMERGE_H
