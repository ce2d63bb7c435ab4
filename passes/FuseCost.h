//===- FuseCost.h - step-fuse's cost model ---------------------*- C++ -*-===//
//
// The questions step-fuse (Fuse.cpp) asks of single ops while it grows
// groups: which ops a group copies instead of reading their stored result,
// which it computes again instead; and the sinking of cheap ops to their
// users done before grouping. docs/fusion.md ("Who may join") gives the reasons
// and the measurements behind each rule.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_FUSECOST_H
#define STEP_PASSES_FUSECOST_H

#include "mlir/IR/Operation.h"

namespace mlir::step {

/// Elements of a ranked tensor value.
int64_t numElements(Value v);

/// An elementwise op or a view (fusionRole Elementwise or View).
bool isEltOrView(Operation *op);

/// Ops a group copies rather than reads as a stored result: views (index
/// maps) and casts (one conversion per element of a source read anyway).
bool copiedIntoFusions(Operation *op);

/// A cheap elementwise op (isCheapElementwise) of one result that reads no
/// more bytes than it writes, a broadcast operand counting nothing when its
/// source has at most 1/8 of its elements (re-read from cache: the mean or
/// gamma of a row). Computed again in each consumer's fusion, it is read
/// there from its own operands and never written: layer norm's gradient
/// centres x, scales it and multiplies the upstream gradient by gamma this
/// way, three f32 tensors not stored.
bool recomputableInFusions(Operation *op);

/// Moves elementwise/view ops of `block` to just before their first user
/// (last op first, so chains move together) where that lengthens no live
/// bytes: the operands it is the last user of (made by ops, not arguments
/// or constants) are no bigger than its result (a broadcast, a cast up).
/// Then a reduction's result is not read by a broadcast placed before a
/// sibling reduction, which would keep the two apart; and a gradient
/// accumulation's running sum does not keep every micro-batch's gradient
/// alive until the end.
void sinkCheapOps(Block &block);

} // namespace mlir::step

#endif // STEP_PASSES_FUSECOST_H
