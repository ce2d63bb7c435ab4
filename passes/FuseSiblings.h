//===- FuseSiblings.h - Reductions that may share a producer ----*- C++ -*-===//
//
// step-fuse's phase 3 (Fuse.cpp) groups a reduction root with the later
// reductions of its shape that share a producer with it: a value in both
// operands' cones, the values computed through free elementwise/view ops
// up to three levels above the operand. A cone depends on which ops are
// already in groups, so it is walked again for each pair; the ball of an
// operand (every value within those levels through elementwise/view ops
// of the block, in a group or not) holds its cone at any time, and does
// not change while groups form. An index of the balls, built once, lists
// for a root the later reductions whose ball meets its own: the only ones
// whose cones can meet. Building it costs the balls' sizes; a lookup, the
// entries of the root's ball.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_FUSESIBLINGS_H
#define STEP_PASSES_FUSESIBLINGS_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <vector>

namespace mlir::step {

/// A few values, looked up by linear search while they are few.
using ValueList = llvm::SmallSetVector<Value, 16>;

/// Walks the cone of `v` depth first: `v`, then the operands of its
/// defining op when `expand` accepts that op, `depth` levels up; a value
/// reached twice is expanded only the first time. Adds what it reaches to
/// `seen` and stops at the first value of `other`, returning true (false:
/// the whole cone is in `seen`).
bool walkCone(Value v, int depth, llvm::function_ref<bool(Operation *)> expand,
              ValueList &seen, const ValueList &other);

class ReductionBalls {
public:
  /// The balls of `reductions`' first operands, `depth` levels up through
  /// the elementwise/view ops of `block`.
  ReductionBalls(Block &block, ArrayRef<Operation *> reductions, int depth);

  /// The indices, ascending, of the reductions after `self` whose ball
  /// meets the ball of reduction `self`.
  SmallVector<unsigned> laterMeeting(unsigned self) const;

private:
  std::vector<SmallVector<Value>> balls;
  /// For each value, the reductions (ascending) whose ball holds it.
  llvm::DenseMap<Value, SmallVector<unsigned, 4>> near;
};

} // namespace mlir::step

#endif // STEP_PASSES_FUSESIBLINGS_H
