//===- GradAccum.cpp - Gradient accumulation over micro-batches ----------===//
//
// step-grad-accum{k=K} makes `@forward_backward` (from step-autodiff) take
// K micro-batches at once: every input's leading (batch) dim becomes K times
// larger. The original function is kept, renamed `@forward_backward_micro`
// and made private; the new one slices micro-batch j = rows [j*B, (j+1)*B)
// of every input, calls the micro function on it, and returns
//   loss  = (loss_0 + ... + loss_{K-1}) / K
//   grad  = (grad_0 + ... + grad_{K-1}) / K    (summed in f32)
// i.e. the gradient of loss/K accumulated over micro-batches, which for a
// loss that is a mean over the batch equals one step on the K*B batch.
// Results other than the loss and the gradients (forward extras) are
// dropped: they are per micro-batch and nothing downstream reads them.
//
// Guarantees: params and input names and order are unchanged; only the
// inputs' leading dims change (not those of step-pad-dynamic's `len.S`
// scalars: every micro-batch has the same valid lengths). K = 1 leaves the
// module untouched. Inputs of rank 0 or with a dynamic leading dim are an
// error.
//
// Dropout: each micro-batch must draw its own masks. When the micro
// function has dropouts, it takes one more argument, the micro-batch index
// j (a tensor<i64>, the constant j at call j), fed as the `offset` of each
// of its dropouts, which get `step.micro_batches = K`; step-dropout-offset
// later makes that offset opt.step * K + j, so update u, micro-batch j
// keys its masks by u * K + j (the forward's dropout and its VJP alike).
//
// Cost: K calls (step-inline later unrolls them, so the IR grows K-fold);
// one running sum per gradient, so the accumulators add one gradient-sized
// buffer per param, not K.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/StepAttrs.h"

#include "dialects/step/VJPUtil.h"

namespace mlir::step {
#define GEN_PASS_DEF_GRADACCUM
#include "passes/Passes.h.inc"

namespace {

struct GradAccumPass : impl::GradAccumBase<GradAccumPass> {
  using GradAccumBase::GradAccumBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (k < 1) {
      module.emitError() << "step-grad-accum: k = " << static_cast<int64_t>(k)
                         << " must be >= 1";
      return signalPassFailure();
    }
    if (k == 1)
      return;
    auto micro = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!micro) {
      module.emitError() << "step-grad-accum: no @forward_backward; run "
                            "step-autodiff first";
      return signalPassFailure();
    }
    if (failed(checkInputs(micro)))
      return signalPassFailure();
    SymbolTable symbols(module);
    if (failed(symbols.rename(micro, "forward_backward_micro")))
      return signalPassFailure();
    micro.setPrivate();
    build(micro);
  }

  LogicalResult checkInputs(func::FuncOp f) {
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      if (!isBatchInput(f, i))
        continue;
      auto type = cast<RankedTensorType>(f.getArgument(i).getType());
      if (type.getRank() == 0 || type.isDynamicDim(0))
        return f.emitError()
               << "step-grad-accum: input '" << argName(f, i) << "' of type "
               << quoted(type)
               << " needs a static leading (batch) dim to split into "
               << static_cast<int64_t>(k) << " micro-batches";
    }
    return success();
  }

  void build(func::FuncOp micro) {
    OpBuilder b(micro);
    Location loc = micro.getLoc();
    SmallVector<Type> argTypes;
    SmallVector<bool> isInput;
    for (unsigned i = 0; i < micro.getNumArguments(); ++i) {
      auto type = cast<RankedTensorType>(micro.getArgument(i).getType());
      bool input = isBatchInput(micro, i);
      isInput.push_back(input);
      if (input) {
        SmallVector<int64_t> shape(type.getShape());
        shape[0] *= k;
        type = type.clone(shape);
      }
      argTypes.push_back(type);
    }
    // Kept results: the loss and the gradients.
    SmallVector<unsigned> kept{0};
    for (unsigned r = 1; r < micro.getNumResults(); ++r)
      if (resultKind(micro, r) == "grad")
        kept.push_back(r);
    SmallVector<Type> resultTypes;
    for (unsigned r : kept)
      resultTypes.push_back(micro.getResultTypes()[r]);

    auto f = b.create<func::FuncOp>(loc, "forward_backward",
                                    b.getFunctionType(argTypes, resultTypes));
    for (unsigned i = 0; i < micro.getNumArguments(); ++i)
      if (auto attrs = micro.getArgAttrDict(i))
        f.setArgAttrs(i, attrs);
    for (auto [j, r] : llvm::enumerate(kept))
      if (auto attrs = micro.getResultAttrDict(r))
        f.setResultAttrs(j, attrs);
    Block *body = f.addEntryBlock();
    b.setInsertionPointToStart(body);
    bool microIndex = feedMicroIndex(micro);

    SmallVector<Value> sums(kept.size());
    for (int64_t j = 0; j < k; ++j) {
      SmallVector<Value> args;
      for (auto [i, arg] : llvm::enumerate(body->getArguments())) {
        if (!isInput[i]) {
          args.push_back(arg);
          continue;
        }
        auto type = cast<RankedTensorType>(micro.getArgument(i).getType());
        int64_t rows = type.getDimSize(0);
        SmallVector<int64_t> start(type.getRank(), 0);
        SmallVector<int64_t> limit(
            cast<RankedTensorType>(arg.getType()).getShape());
        start[0] = j * rows;
        limit[0] = (j + 1) * rows;
        args.push_back(b.create<SliceOp>(
            loc, arg, b.getDenseI64ArrayAttr(start),
            b.getDenseI64ArrayAttr(limit),
            b.getDenseI64ArrayAttr(SmallVector<int64_t>(type.getRank(), 1))));
      }
      if (microIndex) {
        auto scalar = RankedTensorType::get({}, b.getI64Type());
        args.push_back(b.create<ConstantOp>(
            loc, scalar, DenseElementsAttr::get(scalar, b.getI64IntegerAttr(j))));
      }
      auto call = b.create<func::CallOp>(loc, micro, args);
      for (auto [s, r] : llvm::enumerate(kept)) {
        Value v = toF32(b, loc, call.getResult(r));
        sums[s] = sums[s] ? Value(b.create<AddOp>(loc, sums[s], v)) : v;
      }
    }
    SmallVector<Value> results;
    for (auto [s, r] : llvm::enumerate(kept)) {
      Value mean = b.create<DivOp>(loc, sums[s],
                                   vjp::splatLike(b, loc, sums[s], double(k)));
      Type want = micro.getResultTypes()[r];
      if (mean.getType() != want)
        mean = b.create<CastOp>(loc, want, mean);
      results.push_back(mean);
    }
    b.create<func::ReturnOp>(loc, results);
  }

  /// With dropouts in `micro`: a last argument, the micro-batch index, as
  /// their offset, and `step.micro_batches = k` on them (step-dropout-offset
  /// mixes in the step counter). Returns whether the argument was added.
  bool feedMicroIndex(func::FuncOp micro) {
    SmallVector<DropoutOp> dropouts;
    micro.walk([&](DropoutOp d) {
      if (!d.getOffset())
        dropouts.push_back(d);
    });
    if (dropouts.empty())
      return false;
    unsigned n = micro.getNumArguments();
    Builder b(micro.getContext());
    auto scalar = RankedTensorType::get({}, b.getI64Type());
    micro.insertArgument(
        n, scalar,
        b.getDictionaryAttr(
            {b.getNamedAttr("step.name", b.getStringAttr("micro_batch"))}),
        micro.getLoc());
    for (DropoutOp d : dropouts) {
      d.getOffsetMutable().assign(micro.getArgument(n));
      d->setAttr("step.micro_batches", b.getI64IntegerAttr(k));
    }
    return true;
  }

  /// Inputs split into micro-batches: all but step-pad-dynamic's valid
  /// lengths (`len.S`), which every micro-batch shares.
  static bool isBatchInput(func::FuncOp f, unsigned i) {
    return argKind(f, i) == "input" && !f.getArgAttr(i, "step.len_of");
  }

  static Value toF32(OpBuilder &b, Location loc, Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType().isF32())
      return v;
    return b.create<CastOp>(loc, type.clone(b.getF32Type()), v);
  }
};

} // namespace
} // namespace mlir::step
