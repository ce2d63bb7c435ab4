//===- SplatBroadcast.cpp - Splat constants as broadcasts of one element --===//
//
// step-splat-broadcast rewrites every `step.constant` whose value is a
// splat (one number repeated) of more than one element into
// `step.broadcast_in_dim` (no dims) of a rank-0 `step.constant` of that
// number.
//
// Why: canonicalization folds `broadcast_in_dim(constant)` into a splat of
// the full shape, and VJP rules build full-shape splats directly (the 1 of
// `1 - tanh^2`, GELU's coefficients, attention's mask fill and scale). The
// plan stores every constant in full, in the artifact and in device
// memory: a GPT-2 step's activation-sized splats alone were tens of
// megabytes for a 2-layer width-256 model and 1057 MB for GPT-2 small at
// batch 8 x 1024 under bf16 AMP (docs/training.md). A broadcast of a scalar fuses into the kernels that read
// it (step-fuse puts it in their body, the constant stays a 4-byte
// operand); without fusion it is a transient the memory plan reuses.
//
// Guarantees:
//   * The function computes the same values: a broadcast of the splat's
//     element has the splat's bits (an exact copy).
//   * After the pass no constant of more than one element is a splat.
//   * One rank-0 constant per distinct value and element type, placed at
//     the top of its block, shared by the broadcasts (CSE's job, done here
//     so nothing needs to run after).
// Run after the last canonicalization, which would fold the broadcasts
// back, and before the memory passes and step-fuse.
//
// Algorithm: one walk over the constants; per block a map from (value,
// type) to its scalar constant. Cost: O(constants).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::step {
#define GEN_PASS_DEF_SPLATBROADCAST
#include "passes/Passes.h.inc"

namespace {

struct SplatBroadcastPass
    : impl::SplatBroadcastBase<SplatBroadcastPass> {
  void runOnOperation() override {
    SmallVector<ConstantOp> splats;
    getOperation().walk([&](ConstantOp c) {
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      auto type = dyn_cast<RankedTensorType>(c.getType());
      if (dense && dense.isSplat() && type && type.hasStaticShape() &&
          type.getNumElements() > 1)
        splats.push_back(c);
    });
    DenseMap<std::pair<Block *, Attribute>, Value> scalars;
    for (ConstantOp c : splats) {
      auto type = cast<RankedTensorType>(c.getType());
      auto dense = cast<DenseElementsAttr>(c.getValue());
      auto scalarType = RankedTensorType::get({}, type.getElementType());
      auto value =
          DenseElementsAttr::get(scalarType, dense.getSplatValue<Attribute>());
      Block *block = c->getBlock();
      Value &scalar = scalars[{block, value}];
      if (!scalar) {
        OpBuilder b = OpBuilder::atBlockBegin(block);
        scalar = b.create<ConstantOp>(c.getLoc(), scalarType, value);
      }
      OpBuilder b(c);
      Value full = b.create<BroadcastInDimOp>(c.getLoc(), type, scalar,
                                              b.getDenseI64ArrayAttr({}));
      c.getResult().replaceAllUsesWith(full);
      c.erase();
    }
  }
};

} // namespace
} // namespace mlir::step
