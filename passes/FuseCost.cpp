//===- FuseCost.cpp - step-fuse's cost model ------------------------------===//

#include "passes/FuseCost.h"

#include "passes/BlockOrder.h"
#include "passes/FusionMerge.h"

#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::step {

int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

bool isEltOrView(Operation *op) {
  FusionRole r = fusionRole(op);
  return r == FusionRole::Elementwise || r == FusionRole::View;
}

bool copiedIntoFusions(Operation *op) {
  return fusionRole(op) == FusionRole::View || isa<CastOp>(op);
}

bool recomputableInFusions(Operation *op) {
  if (fusionRole(op) != FusionRole::Elementwise || !isCheapElementwise(op) ||
      op->getNumResults() != 1)
    return false;
  int64_t reads = 0;
  for (Value v : op->getOperands()) {
    auto bc = v.getDefiningOp<BroadcastInDimOp>();
    if (bc && numElements(bc.getOperand()) * 8 <= numElements(v))
      continue;
    reads += staticBytes(v.getType());
  }
  return reads <= staticBytes(op->getResult(0).getType());
}

/// Bytes whose lifetime grows when `op` moves later in its block.
static int64_t extendedLiveBytes(Operation *op, const BlockOrder &order) {
  Block *block = op->getBlock();
  int64_t n = 0;
  llvm::SmallPtrSet<Value, 4> seen;
  for (Value v : op->getOperands()) {
    Operation *d = v.getDefiningOp();
    if (!d || isa<ConstantOp>(d) || !seen.insert(v).second)
      continue;
    bool last = llvm::all_of(v.getUsers(), [&](Operation *u) {
      Operation *a = block->findAncestorOpInBlock(*u);
      return a == op || order.before(a, op);
    });
    if (last)
      n += staticBytes(v.getType());
  }
  return n;
}

void sinkCheapOps(Block &block) {
  // Positions kept through the moves (Operation::isBeforeInBlock would
  // renumber the block after each).
  BlockOrder order(block);
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
    if (!isEltOrView(&op) || op.use_empty() ||
        extendedLiveBytes(&op, order) > staticBytes(op.getResult(0).getType()))
      continue;
    Operation *first = nullptr;
    for (Operation *u : op.getUsers()) {
      Operation *a = block.findAncestorOpInBlock(*u);
      if (!first || order.before(a, first))
        first = a;
    }
    if (first && first != op.getNextNode()) {
      op.moveBefore(first);
      order.place(&op);
    }
  }
}

} // namespace mlir::step
