//===- VJPElementwise.cpp - VJP rules of elementwise step ops -------------===//
//
// Rules for the unary and binary elementwise ops, select and cast. Each rule
// is the derivative PyTorch's autograd uses (tools/autograd/derivatives.yaml
// and the *_backward kernels it names), built from step ops on the forward
// values it needs, in the kernels' order of operations. Rules save the
// forward *result* where PyTorch does (exp, tanh, sigmoid, sqrt, rsqrt,
// relu, div), so the operand need not stay live.
//
// Conventions at kinks, as PyTorch: abs' = sign(x) (0 at 0 and NaN); relu'
// = 0 where the result is <= 0; maximum/minimum split the gradient half and
// half on ties; pow's base gradient is 0 where the exponent is 0, and its
// exponent gradient is 0 where the base is 0 and the exponent >= 0.
//
// Rules that build constants need static shapes (a splat of a dynamic shape
// cannot be built); the others accept dynamic dims.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

#include <cmath>

namespace mlir::step::vjp {
namespace {

using CD = ComparisonDirection;

Value result(Operation *op) { return op->getResult(0); }

//===----------------------------------------------------------------------===//
// step.add, step.sub, step.neg
//===----------------------------------------------------------------------===//

FailureOr<Grads> addVJP(OpBuilder &, Operation *, Value grad,
                        ArrayRef<bool> needed) {
  return Grads{needed[0] ? grad : Value(), needed[1] ? grad : Value()};
}

FailureOr<Grads> subVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool> needed) {
  return Grads{needed[0] ? grad : Value(),
               needed[1] ? Value(b.create<NegOp>(op->getLoc(), grad))
                         : Value()};
}

FailureOr<Grads> negVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  return Grads{b.create<NegOp>(op->getLoc(), grad)};
}

//===----------------------------------------------------------------------===//
// step.mul, step.div
//===----------------------------------------------------------------------===//

FailureOr<Grads> mulVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool> needed) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  return Grads{needed[0] ? Value(b.create<MulOp>(loc, grad, rhs)) : Value(),
               needed[1] ? Value(b.create<MulOp>(loc, grad, lhs)) : Value()};
}

/// d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b, with a/b the saved result (the
/// same bits PyTorch's div_tensor_other_backward recomputes).
FailureOr<Grads> divVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool> needed) {
  Location loc = op->getLoc();
  Value rhs = op->getOperand(1);
  Grads grads(2);
  if (needed[0])
    grads[0] = b.create<DivOp>(loc, grad, rhs);
  if (needed[1]) {
    Value negGrad = b.create<NegOp>(loc, grad);
    grads[1] = b.create<MulOp>(loc, negGrad,
                               b.create<DivOp>(loc, result(op), rhs));
  }
  return grads;
}

//===----------------------------------------------------------------------===//
// step.abs, step.relu
//===----------------------------------------------------------------------===//

FailureOr<Grads> absVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Value x = op->getOperand(0);
  Arith a(b, op->getLoc(), x.getType());
  // One op per statement where a call has two op-building arguments (see
  // vjp::Arith).
  Value zero = a.c(0.0), one = a.c(1.0), minusOne = a.c(-1.0);
  // sign(x) = (x > 0) - (x < 0): 0 at +-0 and NaN, as torch.sgn.
  Value positive = a.compare(CD::GT, x, zero);
  Value negative = a.compare(CD::LT, x, zero);
  Value sign = a.select(positive, one, a.select(negative, minusOne, zero));
  return Grads{a.mul(grad, sign)};
}

/// threshold_backward(grad, result, 0): NaN passes its gradient through.
FailureOr<Grads> reluVJP(OpBuilder &b, Operation *op, Value grad,
                         ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value zero = a.c(0.0);
  return Grads{a.select(a.compare(CD::LE, result(op), zero), zero, grad)};
}

//===----------------------------------------------------------------------===//
// step.exp, step.log, step.tanh, step.sigmoid, step.sqrt, step.rsqrt
//===----------------------------------------------------------------------===//

FailureOr<Grads> expVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  return Grads{b.create<MulOp>(op->getLoc(), grad, result(op))};
}

FailureOr<Grads> logVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  return Grads{b.create<DivOp>(op->getLoc(), grad, op->getOperand(0))};
}

/// tanh_backward: grad * (1 - y^2).
FailureOr<Grads> tanhVJP(OpBuilder &b, Operation *op, Value grad,
                         ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value y = result(op);
  Value one = a.c(1.0);
  return Grads{a.mul(grad, a.sub(one, a.mul(y, y)))};
}

/// sigmoid_backward: grad * (1 - y) * y.
FailureOr<Grads> sigmoidVJP(OpBuilder &b, Operation *op, Value grad,
                            ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value y = result(op);
  return Grads{a.mul(a.mul(grad, a.sub(a.c(1.0), y)), y)};
}

/// grad / (2 * y).
FailureOr<Grads> sqrtVJP(OpBuilder &b, Operation *op, Value grad,
                         ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  return Grads{a.div(grad, a.mul(a.c(2.0), result(op)))};
}

/// -0.5 * grad * y^3.
FailureOr<Grads> rsqrtVJP(OpBuilder &b, Operation *op, Value grad,
                          ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value y = result(op);
  Value scaled = a.mul(a.c(-0.5), grad);
  return Grads{a.mul(scaled, a.mul(a.mul(y, y), y))};
}

//===----------------------------------------------------------------------===//
// step.erf, step.sin, step.cos
//===----------------------------------------------------------------------===//

/// 2 / sqrt(pi) * exp(-x^2) * grad.
FailureOr<Grads> erfVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value x = op->getOperand(0);
  Value e = a.op<ExpOp>(a.neg(a.mul(x, x)));
  return Grads{a.mul(a.mul(a.c(2.0 / std::sqrt(M_PI)), e), grad)};
}

FailureOr<Grads> sinVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  Location loc = op->getLoc();
  return Grads{
      b.create<MulOp>(loc, grad, b.create<CosOp>(loc, op->getOperand(0)))};
}

FailureOr<Grads> cosVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool>) {
  Location loc = op->getLoc();
  Value sin = b.create<SinOp>(loc, op->getOperand(0));
  return Grads{b.create<MulOp>(loc, grad, b.create<NegOp>(loc, sin))};
}

//===----------------------------------------------------------------------===//
// step.gelu: step.gelu_grad; step.gelu_grad: its derivatives, expanded
//===----------------------------------------------------------------------===//

FailureOr<Grads> geluVJP(OpBuilder &b, Operation *op, Value grad,
                         ArrayRef<bool>) {
  auto gelu = cast<GeluOp>(op);
  // One op (PyTorch's GeluBackward): f16/bf16 computed in f32 and rounded
  // once, a fused kernel of a few instructions per element, and cuBLASLt's
  // DGELU epilogue when the gradient comes from a matmul (step-fuse).
  return Grads{b.create<GeluGradOp>(op->getLoc(), grad, gelu.getOperand(),
                                    gelu.getApproximate())
                   .getResult()};
}

/// gelu_grad(g, x) = g * d(x), d = gelu'(x): the gradient of `g` is
/// grad * d = gelu_grad(grad, x), that of `x` is grad * g * d'(x), with d'
/// written out in ops (second order; f16/bf16 in f32, rounded once).
FailureOr<Grads> geluGradVJP(OpBuilder &b, Operation *op, Value grad,
                             ArrayRef<bool> needed) {
  auto gg = cast<GeluGradOp>(op);
  Location loc = op->getLoc();
  Grads grads(2);
  if (needed[0])
    grads[0] = b.create<GeluGradOp>(loc, grad, gg.getX(), gg.getApproximate());
  if (!needed[1])
    return grads;
  if (failed(requireStaticShapes(op)))
    return failure();
  auto type = cast<RankedTensorType>(grad.getType());
  Type elem = type.getElementType();
  bool narrow = elem.isF16() || elem.isBF16();
  Type f32 = b.getF32Type();
  auto wide = [&](Value v) { return narrow ? castTo(b, loc, v, f32) : v; };
  Value x = wide(gg.getX());
  Arith a(b, loc, narrow ? type.clone(f32) : Type(type));
  Value half = a.c(0.5), one = a.c(1.0);
  Value second; // d'(x)
  if (gg.getApproximate() == GeluApproximation::None) {
    // d = Phi(x) + x phi(x), d' = 2 phi(x) - x^2 phi(x) = phi(x) (2 - x^2).
    Value alpha = a.c(M_2_SQRTPI * M_SQRT1_2 * 0.5), minusHalf = a.c(-0.5);
    Value xSq = a.mul(x, x);
    Value pdf = a.mul(alpha, a.op<ExpOp>(a.mul(xSq, minusHalf)));
    second = a.mul(pdf, a.sub(a.c(2.0), xSq));
  } else {
    // gelu = 0.5 x (1 + t), t = tanh(u), u = beta (x + kappa x^3):
    // d = 0.5 (1 + t) + 0.5 x s u', s = 1 - t^2, u' = beta (1 + 3 kappa x^2);
    // d' = s u' + 0.5 x (s' u' + s u''), s' = -2 t s u', u'' = 6 beta kappa x.
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
    Value xSq = a.mul(x, x);
    Value u = a.mul(a.c(beta), a.add(x, a.mul(a.c(kappa), a.mul(xSq, x))));
    Value t = a.op<TanhOp>(u);
    Value s = a.sub(one, a.mul(t, t));
    Value du = a.mul(a.c(beta), a.add(one, a.mul(a.c(3.0 * kappa), xSq)));
    Value ddu = a.mul(a.c(6.0 * beta * kappa), x);
    Value sdu = a.mul(s, du);
    Value ds = a.mul(a.mul(a.c(-2.0), t), sdu);
    Value inner = a.add(a.mul(ds, du), a.mul(s, ddu));
    second = a.add(sdu, a.mul(a.mul(half, x), inner));
  }
  Value dx = a.mul(a.mul(wide(grad), wide(gg.getGrad())), second);
  grads[1] = narrow ? castTo(b, loc, dx, elem) : dx;
  return grads;
}

//===----------------------------------------------------------------------===//
// step.max, step.min: torch.maximum / torch.minimum
//===----------------------------------------------------------------------===//

/// where(lhs == rhs, grad / 2, grad), masked to 0 on the side that lost
/// (`loses` compares lhs to rhs: LT for max, GT for min).
FailureOr<Grads> extremumVJP(OpBuilder &b, Operation *op, Value grad,
                             ArrayRef<bool> needed, CD loses) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value zero = a.c(0.0);
  Value tie = a.compare(CD::EQ, lhs, rhs);
  Value split = a.select(tie, a.mul(grad, a.c(0.5)), grad);
  CD wins = loses == CD::LT ? CD::GT : CD::LT;
  Grads grads(2);
  if (needed[0])
    grads[0] = a.select(a.compare(loses, lhs, rhs), zero, split);
  if (needed[1])
    grads[1] = a.select(a.compare(wins, lhs, rhs), zero, split);
  return grads;
}

FailureOr<Grads> maxVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool> needed) {
  return extremumVJP(b, op, grad, needed, CD::LT);
}

FailureOr<Grads> minVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool> needed) {
  return extremumVJP(b, op, grad, needed, CD::GT);
}

//===----------------------------------------------------------------------===//
// step.pow: pow_backward_self / pow_backward_exponent
//===----------------------------------------------------------------------===//

FailureOr<Grads> powVJP(OpBuilder &b, Operation *op, Value grad,
                        ArrayRef<bool> needed) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value base = op->getOperand(0), exponent = op->getOperand(1);
  Value zero = a.c(0.0);
  Grads grads(2);
  if (needed[0]) {
    // where(e == 0, 0, grad * (e * x^(e - 1))).
    Value d = a.mul(exponent, b.create<PowOp>(op->getLoc(), base,
                                              a.sub(exponent, a.c(1.0))));
    Value scaled = a.mul(grad, d);
    grads[0] = a.select(a.compare(CD::EQ, exponent, zero), zero, scaled);
  }
  if (needed[1]) {
    // grad * where(e >= 0, where(x == 0, 0, y log x), y log x).
    Value d = a.mul(result(op), a.op<LogOp>(base));
    Value atZero = a.select(a.compare(CD::EQ, base, zero), zero, d);
    Value masked = a.select(a.compare(CD::GE, exponent, zero), atZero, d);
    grads[1] = a.mul(grad, masked);
  }
  return grads;
}

//===----------------------------------------------------------------------===//
// step.select: torch.where; the predicate gets none
//===----------------------------------------------------------------------===//

FailureOr<Grads> selectVJP(OpBuilder &b, Operation *op, Value grad,
                           ArrayRef<bool> needed) {
  if (failed(requireStaticShapes(op)))
    return failure();
  Arith a(b, op->getLoc(), grad.getType());
  Value pred = op->getOperand(0);
  Value zero = a.c(0.0);
  Grads grads(3);
  if (needed[1])
    grads[1] = a.select(pred, grad, zero);
  if (needed[2])
    grads[2] = a.select(pred, zero, grad);
  return grads;
}

//===----------------------------------------------------------------------===//
// step.cast: float -> float casts the gradient back; integers have none
//===----------------------------------------------------------------------===//

FailureOr<Grads> castVJP(OpBuilder &b, Operation *op, Value grad,
                         ArrayRef<bool>) {
  Value x = op->getOperand(0);
  if (!isDifferentiableType(x.getType()))
    return Grads{Value()};
  auto type = cast<RankedTensorType>(x.getType());
  return Grads{castTo(b, op->getLoc(), grad, type.getElementType())};
}

} // namespace

void registerElementwiseRules(llvm::StringMap<VJPRule> &rules) {
  // Binary ops join dynamic dims, so a gradient's type can differ from
  // its operand's; the check turns that into a clear error.
  rules[AddOp::getOperationName()] = withDynamicDimCheck<addVJP>;
  rules[SubOp::getOperationName()] = withDynamicDimCheck<subVJP>;
  rules[MulOp::getOperationName()] = withDynamicDimCheck<mulVJP>;
  rules[DivOp::getOperationName()] = withDynamicDimCheck<divVJP>;
  rules[MaxOp::getOperationName()] = maxVJP;
  rules[MinOp::getOperationName()] = minVJP;
  rules[PowOp::getOperationName()] = powVJP;
  rules[NegOp::getOperationName()] = negVJP;
  rules[AbsOp::getOperationName()] = absVJP;
  rules[ReluOp::getOperationName()] = reluVJP;
  rules[ExpOp::getOperationName()] = expVJP;
  rules[LogOp::getOperationName()] = logVJP;
  rules[TanhOp::getOperationName()] = tanhVJP;
  rules[SigmoidOp::getOperationName()] = sigmoidVJP;
  rules[SqrtOp::getOperationName()] = sqrtVJP;
  rules[RsqrtOp::getOperationName()] = rsqrtVJP;
  rules[ErfOp::getOperationName()] = erfVJP;
  rules[SinOp::getOperationName()] = sinVJP;
  rules[CosOp::getOperationName()] = cosVJP;
  rules[GeluOp::getOperationName()] = geluVJP;
  rules[GeluGradOp::getOperationName()] = geluGradVJP;
  rules[SelectOp::getOperationName()] = selectVJP;
  rules[CastOp::getOperationName()] = castVJP;
}

} // namespace mlir::step::vjp
