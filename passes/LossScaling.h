//===- LossScaling.h - Dynamic loss scaling in @train_step ------*- C++ -*-===//
//
// The update half of step-amp's dynamic loss scaling, used by
// step-optimizer: torch.cuda.amp.GradScaler's unscale_, found_inf check,
// skipped step and scale update, written as step ops inside @train_step.
// step-amp has already multiplied the loss by the state `amp.loss_scale`
// (docs/amp.md).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_LOSSSCALING_H
#define STEP_PASSES_LOSSSCALING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace mlir::step {

inline constexpr const char *kLossScaleState = "amp.loss_scale";
inline constexpr const char *kGrowthTrackerState = "amp.growth_tracker";

struct LossScaler {
  double init = 65536.0, growth = 2.0, backoff = 0.5;
  int64_t interval = 2000;

  /// The scaler of `module`'s @forward (its `step.amp` attribute), or
  /// std::nullopt when it does not scale its loss dynamically.
  static std::optional<LossScaler> of(ModuleOp module);

  /// The scale of this step: the state, where a fresh (zero) state means
  /// `init` (state buffers start at zero).
  Value current(OpBuilder &b, Location loc, Value state) const;

  /// Multiplies the loss and every gradient by 1 / scale (exact when init,
  /// growth and backoff are powers of two, as GradScaler's defaults) and
  /// returns "every gradient is finite" (step.check_finite over at most
  /// 256 gradients per op, so its kernel's parameters fit; a tensor<i1>).
  Value unscale(OpBuilder &b, Location loc, Value scale, Value &loss,
                SmallVectorImpl<Value> &grads) const;

  /// Whether every element of `values` is finite: step.check_finite over
  /// at most 256 values per op (so its kernel's parameters fit), and-ed.
  static Value allFinite(OpBuilder &b, Location loc, ValueRange values);

  /// `updated` if `ok`, else `old`: the skipped step keeps every value.
  static Value keepIfSkipped(OpBuilder &b, Location loc, Value ok,
                             Value updated, Value old);

  /// The next scale and growth tracker (GradScaler's _amp_update_scale):
  /// on overflow scale * backoff and 0; else tracker + 1, and when that
  /// reaches `interval`, scale * growth (kept only if finite) and 0.
  std::pair<Value, Value> next(OpBuilder &b, Location loc, Value ok,
                               Value scale, Value tracker) const;
};

} // namespace mlir::step

#endif // STEP_PASSES_LOSSSCALING_H
