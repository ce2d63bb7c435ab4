//===- Activations.h - What a training step keeps from forward to backward ===//
//
// The *forward* of a one-block training step is the computation of its
// loss (result 0): the loss and, transitively, every operand of the op
// defining a forward value. A forward value (an op result) that an op
// computing no forward value uses is *saved*: it lives from the forward
// into the backward (or the optimizer), which is the memory step-remat
// trades for recomputation. Arguments (params, inputs, state) and
// constants are not counted: they live for the whole step anyway.
//
// A multi-output fusion that computes the loss together with backward
// values is a forward op for the loss and a backward op for the rest: only
// its results in the forward count as forward values.
//
// Cost: O(V + E) over the block.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_ACTIVATIONS_H
#define STEP_PASSES_ACTIVATIONS_H

#include "dialects/step/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::step {

/// Bytes of a static tensor type (i1 as one byte, as the memory plan).
inline int64_t tensorBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * (bits == 1 ? 1 : bits / 8);
}

struct SavedActivations {
  /// The values the loss is computed from (op results and arguments).
  llvm::DenseSet<Value> forward;
  /// Forward op results used by a non-forward op, in program order.
  SmallVector<Value> saved;
  /// Their total size.
  int64_t bytes = 0;
};

/// The saved activations of `f` (one block; result 0 is the loss).
inline SavedActivations savedActivations(func::FuncOp f) {
  SavedActivations out;
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() == 0)
    return out;
  SmallVector<Value> work{ret.getOperand(0)};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!out.forward.insert(v).second)
      continue;
    if (Operation *def = v.getDefiningOp())
      for (Value operand : def->getOperands())
        work.push_back(operand);
  }
  auto computesForward = [&](Operation *op) {
    return llvm::any_of(op->getResults(),
                        [&](Value r) { return out.forward.contains(r); });
  };
  for (Operation &op : body) {
    if (isa<ConstantOp>(op))
      continue;
    for (Value r : op.getResults()) {
      if (!out.forward.contains(r))
        continue;
      bool used = llvm::any_of(r.getUsers(), [&](Operation *user) {
        return !isa<func::ReturnOp>(user) && !computesForward(user);
      });
      if (used) {
        out.saved.push_back(r);
        out.bytes += tensorBytes(r.getType());
      }
    }
  }
  return out;
}

} // namespace mlir::step

#endif // STEP_PASSES_ACTIVATIONS_H
