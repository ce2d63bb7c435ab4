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
#include "dialects/step/VJP.h"

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

/// `value` converted to element type `element` (itself when it has it).
Value castTo(OpBuilder &b, Location loc, Value value, Type element);

/// `value` with its last two dims swapped (rank >= 2).
Value transposeLastTwo(OpBuilder &b, Location loc, Value value);

/// Attention scores `s` ([..., Tq, Tk], static) with the causal mask
/// applied: key j is hidden from query i iff j > i (top-left aligned, as
/// step.attention), by -inf, as PyTorch's masked_fill, so exp() gives
/// exactly 0 there; key 0 is always visible, so no row is all -inf.
Value hideFutureKeys(OpBuilder &b, Location loc, Value s);

/// `value / count` for a float `value`, rounded once as PyTorch divides by
/// an integer count: directly when `count` is exact in the element type,
/// else in f32 and cast back (f16/bf16 cannot hold every count).
Value divideByCount(OpBuilder &b, Location loc, Value value, int64_t count);

/// Terse elementwise arithmetic for rules that are formulas: every operand
/// and constant has the type `type` (the result type of the op whose rule
/// is being built). Needs a static shape for constants. C++ leaves the order
/// in which a call's arguments are evaluated open: when two arguments of one
/// call both build ops, build them in separate statements, or the printed IR
/// would depend on the compiler.
class Arith {
public:
  Arith(OpBuilder &b, Location loc, Type type) : b(b), loc(loc), type(type) {}

  /// A splat constant of the type.
  Value c(double value) { return splat(b, loc, type, value); }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  /// A unary elementwise op (`op<ExpOp>(x)`).
  template <typename OpT> Value op(Value x) { return b.create<OpT>(loc, x); }
  Value compare(ComparisonDirection dir, Value x, Value y) {
    return b.create<CompareOp>(loc, dir, x, y);
  }
  Value select(Value pred, Value onTrue, Value onFalse) {
    return b.create<SelectOp>(loc, pred, onTrue, onFalse);
  }

private:
  OpBuilder &b;
  Location loc;
  Type type;
};

/// Fails with requireStaticShapes's error when a gradient's type is not its
/// operand's because a dim is dynamic in one and static in the other (a
/// binary op's result joins the dims of its operands). Other mismatches are
/// left to step-autodiff, which reports them as internal errors.
FailureOr<Grads> checkDynamicDims(Operation *op, FailureOr<Grads> grads);

/// `Rule` followed by checkDynamicDims: for rules that support dynamic dims.
template <VJPRule Rule>
FailureOr<Grads> withDynamicDimCheck(OpBuilder &b, Operation *op, Value grad,
                                     ArrayRef<bool> needed) {
  return checkDynamicDims(op, Rule(b, op, grad, needed));
}

} // namespace mlir::step::vjp

#endif // STEP_DIALECTS_STEP_VJPUTIL_H
