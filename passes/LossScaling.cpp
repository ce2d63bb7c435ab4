//===- LossScaling.cpp - Dynamic loss scaling in @train_step --------------===//

#include "passes/LossScaling.h"

#include "dialects/step/StepOps.h"
#include "dialects/step/VJPUtil.h"
#include "passes/StepAttrs.h"

#include <algorithm>

namespace mlir::step {

std::optional<LossScaler> LossScaler::of(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  auto amp = forward ? forward->getAttrOfType<DictionaryAttr>("step.amp")
                     : DictionaryAttr();
  if (stringAttrOf(amp, "loss_scale") != "dynamic")
    return std::nullopt;
  LossScaler s;
  auto num = [&](StringRef key, double fallback) {
    auto f = amp.getAs<FloatAttr>(key);
    return f ? f.getValueAsDouble() : fallback;
  };
  s.init = num("init_scale", s.init);
  s.growth = num("growth_factor", s.growth);
  s.backoff = num("backoff_factor", s.backoff);
  if (auto i = amp.getAs<IntegerAttr>("growth_interval"))
    s.interval = i.getInt();
  return s;
}

Value LossScaler::current(OpBuilder &b, Location loc, Value state) const {
  Type f32 = b.getF32Type();
  Value fresh = b.create<CompareOp>(loc, ComparisonDirection::EQ, state,
                                    vjp::scalar(b, loc, f32, 0.0));
  return b.create<SelectOp>(loc, fresh, vjp::scalar(b, loc, f32, init),
                            state);
}

/// `s` (a rank-0 f32) broadcast to `like`'s shape and element type.
static Value spread(OpBuilder &b, Location loc, Value s, Value like) {
  auto type = cast<RankedTensorType>(like.getType());
  if (!type.getElementType().isF32())
    s = b.create<CastOp>(
        loc, RankedTensorType::get({}, type.getElementType()), s);
  return b.create<BroadcastInDimOp>(loc, type, s, b.getDenseI64ArrayAttr({}));
}

Value LossScaler::unscale(OpBuilder &b, Location loc, Value scale,
                          Value &loss, SmallVectorImpl<Value> &grads) const {
  Value inv =
      b.create<DivOp>(loc, vjp::scalar(b, loc, b.getF32Type(), 1.0), scale);
  loss = b.create<MulOp>(loc, loss, inv);
  for (Value &g : grads)
    g = b.create<MulOp>(loc, g, spread(b, loc, inv, g));
  return allFinite(b, loc, grads);
}

Value LossScaler::allFinite(OpBuilder &b, Location loc, ValueRange values) {
  Value finite;
  constexpr size_t kPerOp = 256;
  for (size_t at = 0; at < values.size(); at += kPerOp) {
    size_t n = std::min(kPerOp, values.size() - at);
    Value part = b.create<CheckFiniteOp>(loc, values.slice(at, n));
    // finite && part
    finite = finite ? b.create<SelectOp>(loc, finite, part, finite).getResult()
                    : part;
  }
  return finite;
}

Value LossScaler::keepIfSkipped(OpBuilder &b, Location loc, Value ok,
                                Value updated, Value old) {
  auto type = cast<RankedTensorType>(updated.getType());
  Value mask = ok;
  if (type.getRank() > 0)
    mask = b.create<BroadcastInDimOp>(loc, type.clone(b.getI1Type()), ok,
                                      b.getDenseI64ArrayAttr({}));
  return b.create<SelectOp>(loc, mask, updated, old);
}

std::pair<Value, Value> LossScaler::next(OpBuilder &b, Location loc,
                                         Value ok, Value scale,
                                         Value tracker) const {
  Type f32 = b.getF32Type();
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  Value counted =
      b.create<AddOp>(loc, tracker, vjp::splat(b, loc, i64, 1.0));
  Value grow = b.create<CompareOp>(loc, ComparisonDirection::GE, counted,
                                   vjp::splat(b, loc, i64,
                                              static_cast<double>(interval)));
  Value zero = vjp::splat(b, loc, i64, 0.0);
  Value grown = b.create<MulOp>(loc, scale, vjp::scalar(b, loc, f32, growth));
  // Growth that overflows f32 is not applied (as _amp_update_scale).
  Value growOk = b.create<SelectOp>(loc, grow,
                                    b.create<CheckFiniteOp>(loc, grown),
                                    grow);
  Value cleanScale = b.create<SelectOp>(loc, growOk, grown, scale);
  Value cleanTracker = b.create<SelectOp>(loc, grow, zero, counted);
  Value backedOff =
      b.create<MulOp>(loc, scale, vjp::scalar(b, loc, f32, backoff));
  return {b.create<SelectOp>(loc, ok, cleanScale, backedOff),
          b.create<SelectOp>(loc, ok, cleanTracker, zero)};
}

} // namespace mlir::step
