//===- FuseSiblings.cpp - Reductions that may share a producer ------------===//

#include "passes/FuseSiblings.h"

#include "passes/FuseCost.h"

#include <algorithm>

namespace mlir::step {

bool walkCone(Value v, int depth, llvm::function_ref<bool(Operation *)> expand,
              ValueList &seen, const ValueList &other) {
  if (!seen.insert(v))
    return false;
  if (other.contains(v))
    return true;
  if (depth == 0)
    return false;
  Operation *d = v.getDefiningOp();
  if (d && expand(d))
    for (Value o : d->getOperands())
      if (walkCone(o, depth - 1, expand, seen, other))
        return true;
  return false;
}

/// Every value within `depth` levels of `v` through the elementwise/view
/// ops of `block`; `reach` keeps the most levels left on reaching each.
static void ball(Block &block, Value v, int depth,
                 llvm::DenseMap<Value, int> &reach) {
  auto [it, fresh] = reach.try_emplace(v, depth);
  if (!fresh) {
    if (it->second >= depth)
      return;
    it->second = depth;
  }
  Operation *d = v.getDefiningOp();
  if (depth > 0 && d && d->getBlock() == &block && isEltOrView(d))
    for (Value o : d->getOperands())
      ball(block, o, depth - 1, reach);
}

ReductionBalls::ReductionBalls(Block &block, ArrayRef<Operation *> reductions,
                               int depth)
    : balls(reductions.size()) {
  for (auto [i, r] : llvm::enumerate(reductions)) {
    llvm::DenseMap<Value, int> reach;
    ball(block, r->getOperand(0), depth, reach);
    for (auto &entry : reach) {
      balls[i].push_back(entry.first);
      near[entry.first].push_back(i);
    }
  }
}

SmallVector<unsigned> ReductionBalls::laterMeeting(unsigned self) const {
  SmallVector<unsigned> later;
  for (Value v : balls[self])
    for (unsigned j : near.find(v)->second)
      if (j > self)
        later.push_back(j);
  llvm::sort(later);
  later.erase(std::unique(later.begin(), later.end()), later.end());
  return later;
}

} // namespace mlir::step
