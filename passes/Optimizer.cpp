//===- Optimizer.cpp - The update half of the training step --------------===//
//
// step-optimizer adds `@train_step`, the function a runtime calls once per
// update:
//
//   @train_step(params..., state..., inputs...)
//       -> (loss, new params..., new state...)
//
// It calls `@forward_backward` (step-autodiff, possibly wrapped by
// step-grad-accum), then, in this order, as PyTorch's usual loop does
// (loss.backward(); clip_grad_norm_; optimizer.step(); scheduler.step()):
//  1. t = opt.step + 1, the 1-based number of this update;
//  2. lr = schedule(t - 1), evaluated in f32 from the counter, so a
//     schedule needs no recompilation and resumes correctly from a checkpoint;
//  3. if clip > 0: total = sqrt(sum over params of sum(g^2)), every gradient
//     is multiplied by min(1, clip / (total + 1e-6))
//     (torch.nn.utils.clip_grad_norm_);
//  4. one fused update op per param (step.sgd_update / adamw_update /
//     lamb_update) with the optimizer's hyper-parameters as attributes
//     (with decay-vectors=false, weight decay 0 for params of rank < 2).
//
// With step-amp's dynamic loss scaling (`step.amp` on @forward says so;
// passes/LossScaling.h), the scale of this step is passed to the joint
// function, loss and gradients are unscaled before clipping, a step with a
// non-finite gradient keeps every param and optimizer state (opt.step
// included, so the schedule does not advance either), and the scale and
// its growth tracker ("amp.growth_tracker", i64) are updated as
// GradScaler.update does.
//
// With `guard-finite`, @train_step also returns "guard.finite" (tensor<i1>,
// last): the loss and every gradient are finite, checked where the
// gradients exist (after unscaling, before clipping, which would spread a
// NaN into every gradient). Under dynamic loss scaling an overflowing
// gradient is the scaler's business, a skipped step by design, so only the
// loss is checked (the forward does not depend on the scale) until the
// scale has backed off to 1 or below: then no scaling is left to blame and
// a non-finite gradient trips the guard too. The runtime re-runs a step
// that trips it to name the op (runtime/FiniteGuard.h).
//
// State: "opt.step" (tensor<i64>) and per param the slots the optimizer
// needs ("opt.exp_avg.<p>", "opt.exp_avg_sq.<p>", "opt.momentum_buffer.<p>"),
// all {step.kind = "state"}, zero before the first update. Results carry
// the step.name of the argument they replace.
//
// Cost: O(P) ops for P params (a fixed number per param: the update, and two
// for clipping), plus O(1) for the schedule. step-fuse later merges the
// per-param updates into multi-tensor kernels.
//
//===----------------------------------------------------------------------===//

#include "passes/LossScaling.h"
#include "passes/Passes.h"
#include "passes/StepAttrs.h"

#include "dialects/step/VJPUtil.h"

#include <cmath>

namespace mlir::step {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"

namespace {

struct Hyper {
  double beta1, beta2, eps, weightDecay;
};

struct OptimizerPass : impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto joint = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!joint) {
      module.emitError() << "step-optimizer: no @forward_backward; run "
                            "step-autodiff first";
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      joint.emitError() << "step-optimizer: @train_step already exists";
      return signalPassFailure();
    }
    if (failed(checkOptions(joint)))
      return signalPassFailure();
    build(module, joint);
  }

  LogicalResult checkOptions(func::FuncOp joint) {
    if (optimizer != "sgd" && optimizer != "adamw" && optimizer != "lamb")
      return joint.emitError() << "step-optimizer: unknown optimizer '"
                               << optimizer << "', expected sgd, adamw or lamb";
    if (schedule != "constant" && schedule != "cosine" && schedule != "linear")
      return joint.emitError()
             << "step-optimizer: unknown schedule '" << schedule
             << "', expected constant, cosine or linear";
    if (!(lr >= 0) || warmup < 0 || clip < 0 || momentum < 0 ||
        !(minRatio >= 0 && minRatio <= 1))
      return joint.emitError()
             << "step-optimizer: lr, warmup, clip and momentum must be >= 0 "
                "and min-ratio in [0, 1]";
    if (schedule != "constant" && total <= warmup)
      return joint.emitError()
             << "step-optimizer: schedule '" << schedule << "' needs total ("
             << static_cast<int64_t>(total) << ") > warmup ("
             << static_cast<int64_t>(warmup) << ")";
    if (optimizer != "sgd" && (momentum != 0 || nesterov || dampening != 0))
      return joint.emitError() << "step-optimizer: momentum, dampening and "
                                  "nesterov are SGD options";
    if (nesterov && (momentum <= 0 || dampening != 0))
      return joint.emitError() << "step-optimizer: nesterov needs momentum > "
                                  "0 and dampening = 0";
    return success();
  }

  Hyper hyper() const {
    auto pick = [](double v, double def) { return v < 0 ? def : v; };
    bool sgd = optimizer == "sgd";
    return {pick(beta1, 0.9), pick(beta2, 0.999),
            pick(eps, optimizer == "lamb" ? 1e-6 : 1e-8),
            pick(weightDecay, sgd ? 0.0 : 0.01)};
  }

  /// Optimizer state slots per param.
  SmallVector<StringRef> slots() const {
    if (optimizer == "sgd")
      return momentum != 0 ? SmallVector<StringRef>{"momentum_buffer"}
                           : SmallVector<StringRef>{};
    return {"exp_avg", "exp_avg_sq"};
  }

  /// lr * factor(s) for the update index s (an f32 scalar, 0-based).
  /// Every op is made in its own statement: the order of a call's arguments
  /// is unspecified in C++, so nested creates would make different IR under
  /// different host compilers (the order below is the one g++ chose).
  Value scheduledLr(OpBuilder &b, Location loc, Value s) {
    Type f32 = b.getF32Type();
    auto c = [&](double v) { return vjp::scalar(b, loc, f32, v); };
    Value factor = c(1.0);
    if (schedule != "constant") {
      // p = clamp((s - w) / max(1, T - w), 0, 1)
      Value span = c(double(std::max<int64_t>(1, total - warmup)));
      Value w = c(double(warmup));
      Value p = b.create<DivOp>(loc, b.create<SubOp>(loc, s, w), span);
      Value one = c(1.0);
      Value zero = c(0.0);
      p = b.create<MinOp>(loc, b.create<MaxOp>(loc, p, zero), one);
      Value shape; // in [0, 1], 1 at the start of the decay
      if (schedule == "cosine") {
        Value pi = c(M_PI);
        Value cosine = b.create<CosOp>(loc, b.create<MulOp>(loc, pi, p));
        Value onePlus = b.create<AddOp>(loc, c(1.0), cosine);
        shape = b.create<MulOp>(loc, c(0.5), onePlus);
      } else {
        shape = b.create<SubOp>(loc, c(1.0), p);
      }
      Value decay = b.create<MulOp>(loc, c(1.0 - minRatio), shape);
      factor = b.create<AddOp>(loc, c(minRatio), decay);
    }
    if (warmup > 0) {
      Value w = c(double(warmup));
      Value ramp = b.create<DivOp>(loc, b.create<AddOp>(loc, s, c(1.0)), w);
      Value warming = b.create<CompareOp>(loc, ComparisonDirection::LT, s,
                                          c(double(warmup)));
      factor = b.create<SelectOp>(loc, warming, ramp, factor);
    }
    return b.create<MulOp>(loc, c(lr), factor);
  }

  /// Multiplies every gradient by min(1, clip / (global L2 norm + 1e-6)).
  void clipGradients(OpBuilder &b, Location loc,
                     SmallVectorImpl<Value> &grads) {
    Type f32 = b.getF32Type();
    Value total = vjp::scalar(b, loc, f32, 0.0);
    for (Value g : grads) {
      auto type = cast<RankedTensorType>(g.getType());
      Value g32 = g;
      if (!type.getElementType().isF32())
        g32 = b.create<CastOp>(loc, type.clone(f32), g);
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      Value sq = b.create<MulOp>(loc, g32, g32);
      total = b.create<AddOp>(
          loc, total,
          b.create<ReduceSumOp>(loc, sq, b.getDenseI64ArrayAttr(all), false));
    }
    Value norm = b.create<SqrtOp>(loc, total);
    // One op per statement (see scheduledLr).
    Value denominator =
        b.create<AddOp>(loc, norm, vjp::scalar(b, loc, f32, 1e-6));
    Value coef =
        b.create<DivOp>(loc, vjp::scalar(b, loc, f32, clip), denominator);
    coef = b.create<MinOp>(loc, coef, vjp::scalar(b, loc, f32, 1.0));
    for (Value &g : grads) {
      auto type = cast<RankedTensorType>(g.getType());
      Value c = coef;
      if (!type.getElementType().isF32())
        c = b.create<CastOp>(
            loc, RankedTensorType::get({}, type.getElementType()), c);
      Value bc =
          b.create<BroadcastInDimOp>(loc, type, c, b.getDenseI64ArrayAttr({}));
      g = b.create<MulOp>(loc, g, bc);
    }
  }

  /// "guard.finite" (see the file header). `gradsFinite` and `scale` are
  /// the loss scaler's check and scale, null without dynamic scaling.
  Value finiteGuard(OpBuilder &b, Location loc, Value loss,
                    ArrayRef<Value> grads, Value gradsFinite, Value scale) {
    if (!gradsFinite) {
      SmallVector<Value> all{loss};
      all.append(grads.begin(), grads.end());
      return LossScaler::allFinite(b, loc, all);
    }
    Value lossOk = b.create<CheckFiniteOp>(loc, loss);
    Value both = b.create<SelectOp>(loc, lossOk, gradsFinite, lossOk);
    Value floor = b.create<CompareOp>(
        loc, ComparisonDirection::LE, scale,
        vjp::scalar(b, loc, b.getF32Type(), 1.0));
    return b.create<SelectOp>(loc, floor, both, lossOk);
  }

  void build(ModuleOp module, func::FuncOp joint) {
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    Location loc = joint.getLoc();
    auto stateAttrs = [&](const std::string &name) {
      return b.getDictionaryAttr(
          {b.getNamedAttr("step.kind", b.getStringAttr("state")),
           b.getNamedAttr("step.name", b.getStringAttr(name))});
    };

    // Signature: params, optimizer state, the model's own state (step-amp's
    // loss scale) and the loss scaler's tracker, inputs.
    std::optional<LossScaler> scaler = LossScaler::of(module);
    SmallVector<unsigned> paramArgs, stateArgs, inputArgs;
    for (unsigned i = 0; i < joint.getNumArguments(); ++i) {
      StringRef kind = argKind(joint, i);
      (kind == "param"   ? paramArgs
       : kind == "state" ? stateArgs
                         : inputArgs)
          .push_back(i);
    }
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i : paramArgs) {
      argTypes.push_back(joint.getArgument(i).getType());
      argAttrs.push_back(joint.getArgAttrDict(i));
    }
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    argTypes.push_back(i64Scalar);
    argAttrs.push_back(stateAttrs("opt.step"));
    SmallVector<StringRef> slotNames = slots();
    for (StringRef slot : slotNames)
      for (unsigned i : paramArgs) {
        argTypes.push_back(joint.getArgument(i).getType());
        argAttrs.push_back(
            stateAttrs("opt." + slot.str() + "." + argName(joint, i)));
      }
    for (unsigned i : stateArgs) {
      argTypes.push_back(joint.getArgument(i).getType());
      argAttrs.push_back(joint.getArgAttrDict(i));
    }
    if (scaler) {
      argTypes.push_back(i64Scalar);
      argAttrs.push_back(stateAttrs(kGrowthTrackerState));
    }
    size_t numModelState = argTypes.size() - paramArgs.size() - 1 -
                           slots().size() * paramArgs.size();
    for (unsigned i : inputArgs) {
      argTypes.push_back(joint.getArgument(i).getType());
      argAttrs.push_back(joint.getArgAttrDict(i));
    }

    b.setInsertionPointAfter(joint);
    auto step = b.create<func::FuncOp>(loc, "train_step",
                                       b.getFunctionType(argTypes, {}));
    Block *body = step.addEntryBlock();
    b.setInsertionPointToStart(body);
    size_t numParams = paramArgs.size();
    auto param = [&](size_t k) { return body->getArgument(k); };
    Value counter = body->getArgument(numParams);
    auto slotArg = [&](size_t s, size_t k) {
      return body->getArgument(numParams + 1 + s * numParams + k);
    };
    size_t firstState = numParams + 1 + slotNames.size() * numParams;
    size_t firstInput = firstState + numModelState;

    // The joint function's arguments in its own order; the loss scale is
    // passed as the scale of this step.
    SmallVector<Value> callArgs(joint.getNumArguments());
    for (auto [k, i] : llvm::enumerate(paramArgs))
      callArgs[i] = param(k);
    Value scaleState, scale, tracker;
    for (auto [k, i] : llvm::enumerate(stateArgs)) {
      callArgs[i] = body->getArgument(firstState + k);
      if (scaler && argName(joint, i) == kLossScaleState) {
        scaleState = callArgs[i];
        scale = callArgs[i] = scaler->current(b, loc, scaleState);
      }
    }
    if (scaler) {
      if (!scale) {
        joint.emitError() << "step-optimizer: dynamic loss scaling without "
                             "the state argument "
                          << kLossScaleState;
        return signalPassFailure();
      }
      tracker = body->getArgument(firstState + stateArgs.size());
    }
    for (auto [k, i] : llvm::enumerate(inputArgs))
      callArgs[i] = body->getArgument(firstInput + k);
    auto call = b.create<func::CallOp>(loc, joint, callArgs);
    Value loss = call.getResult(0);
    SmallVector<Value> grads;
    for (unsigned r = 0; r < joint.getNumResults(); ++r)
      if (resultKind(joint, r) == "grad")
        grads.push_back(call.getResult(r));
    // step-autodiff returns one gradient per param, in argument order.
    assert(grads.size() == numParams && "one gradient per param");
    // GradScaler.unscale_: before clipping, on the gradients clipping sees.
    Value finite = scaler ? scaler->unscale(b, loc, scale, loss, grads)
                          : Value();
    Value guard = guardFinite ? finiteGuard(b, loc, loss, grads, finite, scale)
                              : Value();

    Type f32 = b.getF32Type();
    Value t = b.create<AddOp>(loc, counter, vjp::splat(b, loc, i64Scalar, 1.0));
    Value one = vjp::scalar(b, loc, f32, 1.0);
    Value s = b.create<SubOp>(
        loc, b.create<CastOp>(loc, RankedTensorType::get({}, f32), t), one);
    Value lrValue = scheduledLr(b, loc, s);
    if (clip > 0)
      clipGradients(b, loc, grads);

    Hyper h = hyper();
    SmallVector<Value> newParams, newSlots(slotNames.size() * numParams);
    for (size_t k = 0; k < numParams; ++k) {
      // nanoGPT-style param groups: no decay on biases and norm weights.
      auto paramType = cast<RankedTensorType>(param(k).getType());
      double wd =
          !decayVectors && paramType.getRank() < 2 ? 0.0 : h.weightDecay;
      if (optimizer == "sgd") {
        Value buffer = slotNames.empty() ? Value() : slotArg(0, k);
        Type bufferType = buffer ? buffer.getType() : Type();
        auto op = b.create<SgdUpdateOp>(
            loc, param(k).getType(), bufferType, param(k), grads[k], t, lrValue,
            buffer, b.getF64FloatAttr(momentum), b.getF64FloatAttr(dampening),
            b.getF64FloatAttr(wd), nesterov ? b.getUnitAttr() : UnitAttr());
        newParams.push_back(op.getNewParam());
        if (buffer)
          newSlots[k] = op.getNewMomentumBuffer();
      } else {
        auto attrs = std::make_tuple(
            b.getF64FloatAttr(h.beta1), b.getF64FloatAttr(h.beta2),
            b.getF64FloatAttr(h.eps), b.getF64FloatAttr(wd));
        Operation *op =
            optimizer == "adamw"
                ? b.create<AdamwUpdateOp>(
                       loc, param(k), grads[k], slotArg(0, k), slotArg(1, k), t,
                       lrValue, std::get<0>(attrs), std::get<1>(attrs),
                       std::get<2>(attrs), std::get<3>(attrs))
                      .getOperation()
                : b.create<LambUpdateOp>(loc, param(k), grads[k], slotArg(0, k),
                                         slotArg(1, k), t, lrValue,
                                         std::get<0>(attrs), std::get<1>(attrs),
                                         std::get<2>(attrs), std::get<3>(attrs))
                      .getOperation();
        newParams.push_back(op->getResult(0));
        newSlots[k] = op->getResult(1);
        newSlots[numParams + k] = op->getResult(2);
      }
    }

    if (scaler) {
      // A step with an inf/NaN gradient changes nothing but the scale.
      for (size_t k = 0; k < numParams; ++k)
        newParams[k] =
            LossScaler::keepIfSkipped(b, loc, finite, newParams[k], param(k));
      for (size_t s = 0; s < slotNames.size(); ++s)
        for (size_t k = 0; k < numParams; ++k)
          newSlots[s * numParams + k] = LossScaler::keepIfSkipped(
              b, loc, finite, newSlots[s * numParams + k], slotArg(s, k));
      t = LossScaler::keepIfSkipped(b, loc, finite, t, counter);
    }

    SmallVector<Value> results{loss};
    SmallVector<Attribute> resultAttrs{b.getDictionaryAttr(
        {b.getNamedAttr("step.name", b.getStringAttr("loss"))})};
    for (size_t k = 0; k < numParams; ++k) {
      results.push_back(newParams[k]);
      resultAttrs.push_back(argAttrs[k]);
    }
    results.push_back(t);
    resultAttrs.push_back(argAttrs[numParams]);
    for (auto [k, v] : llvm::enumerate(newSlots)) {
      results.push_back(v);
      resultAttrs.push_back(argAttrs[numParams + 1 + k]);
    }
    if (scaler) {
      auto [newScale, newTracker] =
          scaler->next(b, loc, finite, scale, tracker);
      for (auto [v, arg] : {std::make_pair(newScale, scaleState),
                            std::make_pair(newTracker, tracker)}) {
        results.push_back(v);
        resultAttrs.push_back(
            argAttrs[cast<BlockArgument>(arg).getArgNumber()]);
      }
    }
    if (guard) {
      results.push_back(guard);
      resultAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("step.name", b.getStringAttr(kGuardResult))}));
    }
    b.create<func::ReturnOp>(loc, results);
    step.setFunctionType(
        b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    for (auto [i, attrs] : llvm::enumerate(argAttrs))
      step.setArgAttrs(i, attrs);
    step.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
} // namespace mlir::step
