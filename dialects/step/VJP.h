//===- VJP.h - Vector-Jacobian products of step ops -------------*- C++ -*-===//
//
// Reverse-mode rules, one per differentiable op, kept beside the dialect in
// one table file per op family (VJPElementwise.cpp, VJPShape.cpp,
// VJPNN.cpp). `step-autodiff` walks the forward graph backwards and calls the
// rule of every op on the path from a param to the loss.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_DIALECTS_STEP_VJP_H
#define STEP_DIALECTS_STEP_VJP_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::step {

/// Builds the gradients of `op`'s operands at the builder's insertion point.
/// `grad` is the cotangent of the op's (single) result, of the result's
/// type. `needed[i]` says whether operand i's gradient is wanted; a rule
/// should build nothing for the others. On success the result has one entry
/// per operand: the gradient (of the operand's type) where needed, or null
/// for "identically zero". On failure the rule has emitted an error at `op`.
using Grads = SmallVector<Value, 4>;
using VJPRule = FailureOr<Grads> (*)(OpBuilder &b, Operation *op, Value grad,
                                     ArrayRef<bool> needed);

/// Ops through which no gradient flows: comparisons, iota, constants,
/// stop_gradient, check_finite, and every op whose results are not floating
/// point.
bool isNonDifferentiable(Operation *op);

/// The VJP rule of `op`, or null when its op has none.
VJPRule lookupVJPRule(Operation *op);

/// Whether `t` is a tensor of a floating-point element type (the only
/// values that carry gradients).
bool isDifferentiableType(Type t);

/// Layer norm's statistics of `x` over its trailing `normRank` dims, built
/// as step.layer_norm's VJP rule recomputes them: `x` cast to f32, its row
/// mean (reduce_mean, no keepdim), `centered = x - mean`, the biased
/// variance by a second pass, `rowRstd = rsqrt(var + eps)` per row, `rstd`
/// broadcast back and `xhat = centered * rstd`; `normDims` the trailing
/// dims they reduce. step-layer-norm-stats
/// builds the forward from the same ops, so CSE makes the gradient read
/// the forward's statistics. Needs a static-shaped `x`.
struct LayerNormStatsValues {
  Value x, mean, centered, rowRstd, rstd, xhat;
  SmallVector<int64_t> normDims;
};
LayerNormStatsValues buildLayerNormStats(OpBuilder &b, Location loc, Value x,
                                         int64_t normRank, double eps);

namespace vjp {
/// Each family file adds its rules, keyed by op name ("step.add").
void registerElementwiseRules(llvm::StringMap<VJPRule> &rules);
void registerShapeRules(llvm::StringMap<VJPRule> &rules);
void registerNNRules(llvm::StringMap<VJPRule> &rules);
void registerDistRules(llvm::StringMap<VJPRule> &rules);
} // namespace vjp

} // namespace mlir::step

#endif // STEP_DIALECTS_STEP_VJP_H
