//===- VJPUtil.h - Builders shared by the VJP rule files -------*- C++ -*-===//
//
// Small IR builders the rules of VJPElementwise.cpp, VJPShape.cpp and
// VJPNN.cpp share. All results are step ops with inferred types; static
// shapes are assumed where a helper says so (dynamic dims are made static by
// step-pad-dynamic before differentiation needs them).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_DIALECTS_STEP_VJPUTIL_H
#define STEP_DIALECTS_STEP_VJPUTIL_H

#include "dialects/step/StepOps.h"

namespace mlir::step::vjp {

/// A `step.constant` of type `type` with every element equal to `value`.
Value splat(OpBuilder &b, Location loc, Type type, double value);

/// `splat` with the type of `like`.
Value splatLike(OpBuilder &b, Location loc, Value like, double value);

/// A scalar (rank-0) constant of element type `element`.
Value scalar(OpBuilder &b, Location loc, Type element, double value);

/// `value * c` as a step.mul by a splat constant.
Value scale(OpBuilder &b, Location loc, Value value, double c);

/// Sums `grad` (of a broadcast result type) back to `target`'s shape: the
/// VJP of broadcast_in_dim with `dims` mapping target dims to grad dims.
/// Needs static shapes.
Value sumToShape(OpBuilder &b, Location loc, Value grad,
                 RankedTensorType target, ArrayRef<int64_t> dims);

/// Broadcasts `value` of shape `reduced` (the result of reducing `full` over
/// `dims` without keepdim, or with keepdim when `keepdim`) back to `full`.
Value broadcastBack(OpBuilder &b, Location loc, Value value,
                    RankedTensorType full, ArrayRef<int64_t> dims,
                    bool keepdim);

/// Fails with "step-autodiff: the VJP of '<op>' needs static shapes, found
/// <type>" unless every operand and result type of `op` is static.
LogicalResult requireStaticShapes(Operation *op);

} // namespace mlir::step::vjp

#endif // STEP_DIALECTS_STEP_VJPUTIL_H
