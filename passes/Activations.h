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
// its results in the forward count as forward values. A value read only by
// forward ops and `step.offload` (step-offload moved it to host memory for
// the backward) is not saved: its device memory dies in the forward.
//
// Cost: O(V + E) over the block.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_ACTIVATIONS_H
#define STEP_PASSES_ACTIVATIONS_H

#include "dialects/step/Fusion.h"
#include "dialects/step/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::step {

/// The function @`name` of `module` that a memory pass (`pass`:
/// "step-remat", "step-offload") rewrites: one block, not yet fused. Emits
/// an error naming the pass and fails otherwise.
inline FailureOr<func::FuncOp> unfusedStep(ModuleOp module, StringRef name,
                                           StringRef pass) {
  auto f = module.lookupSymbol<func::FuncOp>(name);
  if (!f || f.isExternal()) {
    module.emitError() << pass << ": no function @" << name << " with a body";
    return failure();
  }
  if (!f.getBody().hasOneBlock() || !f.getOps<FusionOp>().empty()) {
    f.emitError() << pass << ": @" << name
                  << " must be one block without step.fusion (run " << pass
                  << " before step-fuse)";
    return failure();
  }
  return f;
}

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
        return !isa<func::ReturnOp, OffloadOp>(user) && !computesForward(user);
      });
      if (used) {
        out.saved.push_back(r);
        out.bytes += tensorBytes(r.getType());
      }
    }
  }
  return out;
}

/// Floating-point operations of one op, the cost model of step-remat and
/// of the FLOP figures in `stepc --report`: a matmul is 2*M*N*K per batch
/// element, attention 2*Tq*Tk*(D + Dv) per head (two matmuls) plus 5 per
/// score (scale, max, exp, sum, divide), attention_grad five matmuls
/// (2*Tq*Tk*(3D + 2Dv)) plus 8 per score, a row op (softmax, layer_norm, the
/// losses) 5 per input element, an optimizer update 10 per element, a
/// fusion the sum of its body, and anything else 1 per result element (a
/// reduction: per input element). Only matmuls and attention matter for
/// the ratios the report quotes; the rest keeps cheap ops from being free.
inline int64_t opFlops(Operation *op) {
  auto numel = [](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.hasStaticShape() ? t.getNumElements() : int64_t(0);
  };
  if (isa<ConstantOp>(op))
    return 0;
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType()).getShape();
    int64_t k = lhs[lhs.size() - (mm.getTransposeA() ? 2 : 1)];
    return 2 * numel(mm.getResult()) * k;
  }
  if (isa<AttentionOp, AttentionLseOp, AttentionGradOp>(op)) {
    auto q = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    auto k = cast<RankedTensorType>(op->getOperand(1).getType()).getShape();
    int64_t dv =
        cast<RankedTensorType>(op->getOperand(2).getType()).getShape().back();
    int64_t heads = 1;
    for (size_t i = 0; i + 2 < q.size(); ++i)
      heads *= q[i];
    int64_t scores = heads * q[q.size() - 2] * k[k.size() - 2];
    if (isa<AttentionOp, AttentionLseOp>(op))
      return scores * (2 * q.back() + 2 * dv + 5);
    // S and dP recomputed, then dq, dk and dv: five products.
    return scores * (6 * q.back() + 4 * dv + 8);
  }
  if (auto fusion = dyn_cast<FusionOp>(op)) {
    int64_t sum = 0;
    for (Operation &inner : fusion.getBlock().without_terminator())
      sum += opFlops(&inner);
    return sum;
  }
  int64_t out = 0;
  for (Value r : op->getResults())
    out += numel(r);
  switch (fusionRole(op)) {
  case FusionRole::Reduce:
    return op->getNumOperands() ? numel(op->getOperand(0)) : out;
  case FusionRole::RowOp:
    return 5 * (op->getNumOperands() ? numel(op->getOperand(0)) : out);
  case FusionRole::Update:
    return 10 * out;
  default:
    return out;
  }
}

} // namespace mlir::step

#endif // STEP_PASSES_ACTIVATIONS_H
