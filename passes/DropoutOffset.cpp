//===- DropoutOffset.cpp - A new dropout mask every training step ---------===//
//
// step-dropout-offset feeds every `step.dropout` of a training step the
// step counter as its `offset`, so its mask changes from one update to the
// next, as `torch.nn.functional.dropout` draws a fresh mask each call.
// Without it a traced dropout keys its mask by its seed alone: the same
// elements would be dropped at every step.
//
// Guarantees:
//   * After the pass every dropout of @train_step has an offset: the value
//     of the `opt.step` argument (updates done before this one: 0, 1, ...).
//     A dropout step-grad-accum gave micro-batch j's index as its offset
//     (marked `step.micro_batches = K`) gets opt.step * K + j, so every
//     micro-batch of every update draws its own masks. Any other dropout
//     that already has an offset keeps it.
//   * The first update (opt.step = 0) computes exactly what it computed
//     before: offset 0 keys the mask by the seed alone
//     (runtime/cpu/Kernels.h dropoutKey). Later updates draw other masks.
//   * The forward's dropout and its VJP (a dropout of the cotangent with
//     the same seed) read the same offset, so the gradient stays exact.
//   * The function gets `step.dropout_offset = N`, the dropouts fed.
// Run after inlining (the forward's dropouts are then in @train_step),
// before step-fuse (the offset is one more fusion input). A step without
// dropout is left unchanged; one with dropout but no `opt.step` argument
// is an error.
//
// Known limit: under fp16 a skipped (non-finite) update keeps the counter,
// so the retried step reuses its masks.
//
// Cost: O(N) for N ops.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::step {
#define GEN_PASS_DEF_DROPOUTOFFSET
#include "passes/Passes.h.inc"

namespace {

struct DropoutOffsetPass : impl::DropoutOffsetBase<DropoutOffsetPass> {
  using DropoutOffsetBase::DropoutOffsetBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(funcName);
    if (!f || f.isExternal()) {
      module.emitError() << "step-dropout-offset: no function @" << funcName
                         << " with a body";
      return signalPassFailure();
    }
    SmallVector<DropoutOp> dropouts;
    f.walk([&](DropoutOp d) {
      if (!d.getOffset() || d->hasAttr("step.micro_batches"))
        dropouts.push_back(d);
    });
    if (dropouts.empty())
      return;
    Value counter;
    for (BlockArgument arg : f.getArguments()) {
      auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                 "step.name");
      if (name && name.getValue() == "opt.step")
        counter = arg;
    }
    auto type = counter ? dyn_cast<RankedTensorType>(counter.getType())
                        : RankedTensorType();
    if (!type || type.getRank() != 0 || !type.getElementType().isInteger(64)) {
      dropouts.front().emitError(
          "step-dropout-offset: @")
          << funcName << " has no opt.step argument of type tensor<i64> to "
          << "draw a new mask per update from (run step-optimizer first)";
      return signalPassFailure();
    }
    for (DropoutOp d : dropouts) {
      auto micro = d->getAttrOfType<IntegerAttr>("step.micro_batches");
      if (!micro || !d.getOffset()) {
        d.getOffsetMutable().assign(counter);
        continue;
      }
      // opt.step * K + j (CSE shares the product among the dropouts).
      OpBuilder b(d);
      Value k = b.create<ConstantOp>(
          d.getLoc(), type, DenseElementsAttr::get(type, micro.getValue()));
      Value first = b.create<MulOp>(d.getLoc(), counter, k);
      d.getOffsetMutable().assign(
          b.create<AddOp>(d.getLoc(), first, d.getOffset()).getResult());
      d->removeAttr("step.micro_batches");
    }
    f->setAttr("step.dropout_offset",
               Builder(f.getContext())
                   .getI64IntegerAttr(static_cast<int64_t>(dropouts.size())));
  }
};

} // namespace
} // namespace mlir::step
