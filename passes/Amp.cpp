//===- Amp.cpp - step-amp: mixed precision as a compiler pass -------------===//
//
// step-amp rewrites @forward so that it computes in mixed precision, as
// torch.autocast does at run time: every op is put in one of three classes
// by ONE policy table (ampPolicy below, documented in docs/amp.md):
//  - low:    matmul, attention: float operands cast to the 16-bit type
//            (bf16 or f16); the kernels accumulate in f32 and round once;
//  - f32:    softmax, log_softmax, layer_norm, reduce_sum/mean/max, exp,
//            log, cross_entropy: 16-bit operands cast up to f32, the result
//            is f32; also every op named by `keep-f32` or marked
//            `step.amp = "f32"` (the tracing API's autocast-off scope);
//  - follow: everything else computes in the type of its activations: the
//            widest float type among operands that are not "weak"; a weak
//            operand — a param, a constant, or a view of one (a bias, a
//            splat scale) — is cast to that type, the way autocast
//            casts a linear's bias and a Python scalar never promotes a
//            tensor. With no activation operand the op is left alone.
// Casts of one value to one type are made once, right after the value, and
// shared by every consumer; a cast of a view of a param is made on the
// param and the view rebuilt, so a parameter's 16-bit copy is made once per
// step (and once for all micro-batches: step-grad-accum's inlined copies
// are merged by CSE). Params stay f32 master weights: their types never
// change, and the cast's VJP returns f32 gradients. Results keep their
// declared types (a cast back at the return). Redundant casts are folded by
// the canonicalizer (CastOp::fold: a widening followed by its narrowing is
// the identity); the pass never writes one.
//
// With `loss-scale=dynamic` (the default for f16) the pass also adds the
// state argument `amp.loss_scale` and multiplies the loss by it before
// step-autodiff, and records the scaler's options in `step.amp` on
// @forward for step-optimizer, which unscales, checks, skips and updates
// the scale (docs/amp.md, torch.cuda.amp.GradScaler semantics).
//
// Cost: one walk over the ops, O(N) casts at most (one per value and type).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/StepAttrs.h"

#include "dialects/step/VJPUtil.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::step {
#define GEN_PASS_DEF_AMP
#include "passes/Passes.h.inc"

namespace {

enum class AmpClass { Low, F32, Follow };

/// The policy table: what computes in 16 bits and what in f32. Everything
/// not listed follows its activations.
AmpClass ampPolicy(Operation *op) {
  if (isa<MatmulOp, AttentionOp>(op))
    return AmpClass::Low;
  if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, ReduceSumOp, ReduceMeanOp,
          ReduceMaxOp, ExpOp, LogOp, CrossEntropyOp>(op))
    return AmpClass::F32;
  return AmpClass::Follow;
}

bool isFloatValue(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

class AmpRewriter {
public:
  AmpRewriter(func::FuncOp f, Type low, const llvm::StringSet<> &keep)
      : f(f), low(low), keep(keep), f32(Float32Type::get(f.getContext())) {}

  LogicalResult run() {
    for (BlockArgument a : f.getArguments())
      if (argKind(f, a.getArgNumber()) == "param")
        weak.insert(a);
    Block &body = f.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        restoreResults(ret);
        continue;
      }
      if (failed(rewrite(&op)))
        return failure();
    }
    // Views of params whose every user now reads the 16-bit copy.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<BroadcastInDimOp, ReshapeOp>(op) && op.use_empty())
        op.erase();
    return success();
  }

private:
  func::FuncOp f;
  Type low;
  const llvm::StringSet<> &keep;
  Type f32;
  /// Params, constants, views of them and this pass's casts of them: they
  /// follow the activations they meet instead of promoting them.
  llvm::DenseSet<Value> weak;
  llvm::DenseMap<std::pair<Value, Type>, Value> castOf;
  llvm::DenseSet<Operation *> made; ///< casts and views this pass built

  AmpClass classOf(Operation *op) {
    auto mark = op->getAttrOfType<StringAttr>("step.amp");
    if ((mark && mark.getValue() == "f32") ||
        keep.contains(op->getName().stripDialect()))
      return AmpClass::F32;
    return ampPolicy(op);
  }

  /// `v` as element type `t`: one cast per (value, type), placed right
  /// after `v`; a view of a value is rebuilt on the cast of that value.
  Value castTo(Value v, Type t) {
    if (elementOf(v) == t)
      return v;
    auto key = std::make_pair(v, t);
    if (Value c = castOf.lookup(key))
      return c;
    OpBuilder b(f.getContext());
    auto type = cast<RankedTensorType>(v.getType()).clone(t);
    Operation *def = v.getDefiningOp();
    Value result;
    if (def && isa<BroadcastInDimOp, ReshapeOp>(def) &&
        weak.contains(v)) {
      Value inner = castTo(def->getOperand(0), t);
      b.setInsertionPointAfter(def);
      if (inner.getDefiningOp() && inner.getDefiningOp()->getBlock() ==
                                       def->getBlock() &&
          def->isBeforeInBlock(inner.getDefiningOp()))
        b.setInsertionPointAfter(inner.getDefiningOp());
      Operation *view = b.clone(*def);
      view->setOperand(0, inner);
      view->getResult(0).setType(type);
      result = view->getResult(0);
      made.insert(view);
    } else {
      if (def)
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&f.getBody().front());
      auto c = b.create<CastOp>(v.getLoc(), type, v);
      made.insert(c);
      result = c.getResult();
    }
    if (weak.contains(v))
      weak.insert(result);
    castOf[key] = result;
    return result;
  }

  /// Sets the float results of `op` to what its operands now imply.
  LogicalResult retype(Operation *op) {
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      SmallVector<Type> types;
      if (failed(infer.inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getAttrDictionary(), op->getPropertiesStorage(),
              op->getRegions(), types)))
        return op->emitError("step-amp: cannot infer the result types after "
                             "changing operand types");
      for (auto [r, t] : llvm::zip(op->getResults(), types))
        r.setType(t);
      return success();
    }
    if (isa<BroadcastInDimOp, ReshapeOp>(op)) {
      Value r = op->getResult(0);
      r.setType(cast<RankedTensorType>(r.getType())
                    .clone(elementOf(op->getOperand(0))));
    }
    return success();
  }

  LogicalResult rewrite(Operation *op) {
    if (isa<ConstantOp>(op))
      weak.insert(op->getResult(0));
    if (made.contains(op) || isa<CastOp, ConstantOp>(op) ||
        !llvm::any_of(op->getOperands(), isFloatValue))
      return success();
    SmallVector<unsigned> floats;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (isFloatValue(op->getOperand(i)))
        floats.push_back(i);
    Type target;
    switch (classOf(op)) {
    case AmpClass::Low:
      target = low;
      break;
    case AmpClass::F32:
      target = f32;
      break;
    case AmpClass::Follow: {
      // The widest type among activations; params follow them.
      for (unsigned i : floats) {
        Value v = op->getOperand(i);
        if (weak.contains(v))
          continue;
        if (!target || elementOf(v).getIntOrFloatBitWidth() >
                           target.getIntOrFloatBitWidth())
          target = elementOf(v);
      }
      break;
    }
    }
    bool allWeak = llvm::all_of(floats, [&](unsigned i) {
      return weak.contains(op->getOperand(i));
    });
    if (target)
      for (unsigned i : floats)
        op->setOperand(i, castTo(op->getOperand(i), target));
    if (failed(retype(op)))
      return failure();
    if (allWeak && isa<BroadcastInDimOp, ReshapeOp, TransposeOp, SliceOp>(
                          op))
      weak.insert(op->getResult(0));
    return success();
  }

  void restoreResults(func::ReturnOp ret) {
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto want = cast<RankedTensorType>(f.getResultTypes()[i]);
      if (v.getType() != want)
        ret->setOperand(i, castTo(v, want.getElementType()));
    }
  }
};

struct AmpPass : impl::AmpBase<AmpPass> {
  using AmpBase::AmpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>("forward");
    if (!f || f.isExternal()) {
      module.emitError() << "step-amp: no @forward with a body";
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    Type low;
    if (dtype == "bf16")
      low = BFloat16Type::get(ctx);
    else if (dtype == "fp16")
      low = Float16Type::get(ctx);
    else {
      module.emitError() << "step-amp: dtype '" << dtype
                         << "' is not bf16 or fp16";
      return signalPassFailure();
    }
    std::string scaling = lossScale;
    if (scaling == "auto")
      scaling = dtype == "fp16" ? "dynamic" : "none";
    if (scaling != "none" && scaling != "dynamic") {
      module.emitError() << "step-amp: loss-scale '" << lossScale
                         << "' is not auto, none or dynamic";
      return signalPassFailure();
    }
    if (!(initScale > 0) || !(growthFactor > 1) || !(backoffFactor > 0) ||
        !(backoffFactor < 1) || growthInterval < 1) {
      module.emitError()
          << "step-amp: init-scale > 0, growth-factor > 1, 0 < "
             "backoff-factor < 1 and growth-interval >= 1 are required";
      return signalPassFailure();
    }
    llvm::StringSet<> keep;
    for (const std::string &name : keepF32)
      keep.insert(name);
    if (scaling == "dynamic" &&
        f.getResultTypes().front() !=
            RankedTensorType::get({}, Float32Type::get(ctx))) {
      f.emitError() << "step-amp: loss scaling needs @forward to return a "
                       "scalar f32 loss first, found "
                    << f.getResultTypes().front();
      return signalPassFailure();
    }
    if (failed(AmpRewriter(f, low, keep).run()))
      return signalPassFailure();

    Builder b(ctx);
    SmallVector<NamedAttribute> info{
        b.getNamedAttr("dtype", b.getStringAttr(dtype)),
        b.getNamedAttr("loss_scale", b.getStringAttr(scaling))};
    if (scaling == "dynamic") {
      info.push_back(
          b.getNamedAttr("init_scale", b.getF64FloatAttr(initScale)));
      info.push_back(
          b.getNamedAttr("growth_factor", b.getF64FloatAttr(growthFactor)));
      info.push_back(
          b.getNamedAttr("backoff_factor", b.getF64FloatAttr(backoffFactor)));
      info.push_back(b.getNamedAttr("growth_interval",
                                    b.getI64IntegerAttr(growthInterval)));
      scaleLoss(f);
    }
    f->setAttr("step.amp", b.getDictionaryAttr(info));
  }

  /// Adds the state argument amp.loss_scale and returns loss * scale as
  /// the loss (the value step-autodiff differentiates).
  void scaleLoss(func::FuncOp f) {
    MLIRContext *ctx = f.getContext();
    Builder b(ctx);
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    unsigned at = f.getNumArguments();
    (void)f.insertArgument(
        at, scalar,
        b.getDictionaryAttr(
            {b.getNamedAttr("step.kind", b.getStringAttr("state")),
             b.getNamedAttr("step.name", b.getStringAttr("amp.loss_scale"))}),
        f.getLoc());
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    OpBuilder ob(ret);
    Value loss = ret.getOperand(0);
    ret->setOperand(
        0, ob.create<MulOp>(ret.getLoc(), loss, f.getArgument(at)));
  }
};

} // namespace
} // namespace mlir::step
