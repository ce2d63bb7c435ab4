//===- AttentionStats.cpp - Attention saves its statistics for the grad ---===//
//
// step-attention-stats hands each attention's row statistics from the
// forward to its gradient, as FlashAttention does: the forward kernel
// already has every query row's max and sum of exponentials when it
// finishes, so it stores their log-sum-exp (4 bytes a row) instead of the
// gradient recomputing it in a pass over all the keys.
//
// Guarantees:
//   * Every step.attention of @train_step with at least one
//     step.attention_grad of the same query, key, value, valid length,
//     causal mask and scale becomes a step.attention_lse of the same
//     operands (its first result replaces the attention's), and each such
//     gradient gets that result and log-sum-exp as its `saved` operands.
//     Everything else is left unchanged.
//   * The gradients equal those computed without `saved` up to rounding:
//     P is exp(S * scale - lse) either way, and rowsum(P * dP) becomes
//     rowsum(grad * out), the same sum in another order (with out rounded
//     to its element type; FlashAttention-2 does the same).
// Run after inlining and CSE (the forward and its gradient then read the
// same values), before the memory passes, which see the saved tensors live
// until the gradient and may recompute or offload them like any other.
//
// Cost: O(N) for N ops. Memory: the log-sum-exp (f32, one per query row)
// and the forward's result stay live until the gradient (the result mostly
// is anyway: the output projection's gradient reads it). Time: the
// gradient's first kernel no longer recomputes S = q k^T and dP = g v^T for
// the statistics, one pass of the three the two gradient kernels made.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>
#include <tuple>

namespace mlir::step {
#define GEN_PASS_DEF_ATTENTIONSTATS
#include "passes/Passes.h.inc"

namespace {

/// What makes an attention_grad the gradient of an attention: the same
/// operands and attributes.
using AttentionKey =
    std::tuple<void *, void *, void *, void *, bool, const void *>;

template <typename AttentionLikeOp> AttentionKey keyOf(AttentionLikeOp op) {
  auto ptr = [](Value v) { return v ? v.getAsOpaquePointer() : nullptr; };
  return {ptr(op.getQuery()),
          ptr(op.getKey()),
          ptr(op.getValue()),
          ptr(op.getValid()),
          op.getCausal(),
          op.getScaleAttr() ? op.getScaleAttr().getAsOpaquePointer() : nullptr};
}

struct AttentionStatsPass : impl::AttentionStatsBase<AttentionStatsPass> {
  using AttentionStatsBase::AttentionStatsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(funcName);
    if (!f || f.isExternal()) {
      module.emitError() << "step-attention-stats: no function @" << funcName
                         << " with a body";
      return signalPassFailure();
    }
    std::map<AttentionKey, SmallVector<AttentionGradOp>> grads;
    f.walk([&](AttentionGradOp g) {
      if (!g.getOut())
        grads[keyOf(g)].push_back(g);
    });
    SmallVector<AttentionOp> forwards;
    f.walk([&](AttentionOp a) {
      if (grads.count(keyOf(a)))
        forwards.push_back(a);
    });
    for (AttentionOp a : forwards) {
      SmallVector<AttentionGradOp> &users = grads[keyOf(a)];
      if (users.empty())
        continue; // another forward of the same key took them
      OpBuilder b(a);
      auto lse = b.create<AttentionLseOp>(a.getLoc(), a.getQuery(), a.getKey(),
                                          a.getValue(), a.getValid(),
                                          a.getCausalAttr(), a.getScaleAttr());
      lse->setDiscardableAttrs(a->getDiscardableAttrDictionary());
      a.getResult().replaceAllUsesWith(lse.getResult());
      a->erase();
      for (AttentionGradOp g : users) {
        g.getOutMutable().assign(lse.getResult());
        g.getLseMutable().assign(lse.getLse());
      }
      users.clear();
    }
  }
};

} // namespace
} // namespace mlir::step
