//===- BlockOrder.h - Positions of a block's ops under edits ----*- C++ -*-===//
//
// Comparable positions of the ops of one block that survive inserting and
// moving ops, for passes that compare positions while they edit the block
// (step-fuse's grouping and outlining, its sinking of cheap ops).
//
// MLIR's own Operation::isBeforeInBlock recomputes the order of the whole
// block after any move within it (a splice invalidates it), so a pass that
// moves M ops and compares after each move pays O(M * V) for a block of V
// ops; and renumbering a map after each edit costs the same. Here the ops
// are numbered kStride apart once; an op inserted or moved takes the
// midpoint of its neighbours' positions (place), so up to 32 edits can
// land between the same two original ops before a renumbering, which is
// O(V) and keeps the order. Positions compare as the block's order and
// are all positive (so -1 can stand for "before every op"); their values
// mean nothing else (no arithmetic on them).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_BLOCKORDER_H
#define STEP_PASSES_BLOCKORDER_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <cassert>

namespace mlir::step {

class BlockOrder {
public:
  explicit BlockOrder(Block &b) : block(&b) { renumber(); }

  /// The position of `op`, an op of the block that is numbered or placed.
  int64_t operator[](Operation *op) const {
    assert(pos.count(op) && "op not numbered in this block");
    return pos.lookup(op);
  }
  /// Whether `a` comes before `b` (ops of the block).
  bool before(Operation *a, Operation *b) const {
    return (*this)[a] < (*this)[b];
  }

  /// Numbers every op of the block again, kStride apart from kStride on.
  void renumber() {
    pos.clear();
    int64_t i = 0;
    for (Operation &op : *block)
      pos[&op] = (++i) * kStride;
  }

  /// Gives `op`, just inserted or moved within the block, a position
  /// between its neighbours' (which must be numbered or placed).
  void place(Operation *op) {
    assert(op->getBlock() == block && "op of another block");
    Operation *prev = op->getPrevNode(), *next = op->getNextNode();
    int64_t lo = prev ? (*this)[prev] : 0;
    int64_t hi = next ? (*this)[next] : lo + 2 * kStride;
    if (hi - lo < 2)
      return renumber();
    pos[op] = lo + (hi - lo) / 2;
  }

  /// Forgets `op` before it is erased (a later op may reuse its address).
  void forget(Operation *op) { pos.erase(op); }

private:
  static constexpr int64_t kStride = int64_t(1) << 32;
  Block *block;
  llvm::DenseMap<Operation *, int64_t> pos;
};

} // namespace mlir::step

#endif // STEP_PASSES_BLOCKORDER_H
