//===- FuseMatmul.h - step-fuse's matmul epilogue groups --------*- C++ -*-===//
//
// Phase 1 of step-fuse (passes/Fuse.cpp): which ops join each matmul as
// one cuBLASLt call with an epilogue (runtime/cuda/MatmulEpilogue.h reads
// the fusion back). Kept apart from the phases that grow kernels.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_FUSEMATMUL_H
#define STEP_PASSES_FUSEMATMUL_H

#include "dialects/step/StepOps.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::step {

/// One matmul's epilogue group: the ops that move into the fusion, and the
/// views cloned into it that stay outside for other readers.
struct MatmulGroup {
  llvm::SetVector<Operation *> ops;
  llvm::SetVector<Operation *> dups;
};

/// For each matmul of `block` in program order that `isFree` and whose
/// product has one user: matmul -> bias add (of a rank-1 broadcast over
/// the last dim) -> relu or tanh-GELU, each the single user of the one
/// before; with `geluEpilogues` also a tanh-GELU whose input is read later
/// (GELU_AUX: the input is yielded) and matmul -> tanh gelu_grad of the
/// product -> the reduce_sum of that over every dim but the last, into a
/// vector, when the gradient has other readers too (DGELU[_BGRAD]), where
/// cuBLASLt's aux matrix fits (one rhs matrix, the lhs not transposed, a static
/// last dim that is a multiple of 8). Each group of two or more ops goes to
/// `commit` at once (so `isFree` sees it for the next matmul). Cost: O(users)
/// per matmul.
void formMatmulGroups(Block &block, bool geluEpilogues,
                      llvm::function_ref<bool(Operation *)> isFree,
                      llvm::function_ref<void(MatmulGroup)> commit);

/// Whether formMatmulGroups could fold an op after `mm`'s product into its
/// call (a bias add, an activation, a gelu_grad), with either setting of
/// gelu-epilogues and every op free: step-fuse-bias-grad leaves such a
/// matmul to it.
bool hasProductEpilogue(MatmulOp mm);

} // namespace mlir::step

#endif // STEP_PASSES_FUSEMATMUL_H
