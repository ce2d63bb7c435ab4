//===- VJPElementwise.cpp - VJP rules of elementwise step ops -------------===//
//
// Rules for the unary and binary elementwise ops, select and cast. Each rule
// is the derivative PyTorch's autograd uses (tools/autograd/derivatives.yaml
// semantics), built from step ops on the forward values it needs.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

namespace mlir::step::vjp {
namespace {

//===----------------------------------------------------------------------===//
// step.add, step.sub, step.neg
//===----------------------------------------------------------------------===//

FailureOr<Grads> addVJP(OpBuilder &, Operation *, Value grad,
                   ArrayRef<bool>) {
  return Grads{grad, grad};
}

FailureOr<Grads> subVJP(OpBuilder &b, Operation *op, Value grad,
                   ArrayRef<bool> needed) {
  return Grads{grad, needed[1] ? Value(b.create<NegOp>(op->getLoc(), grad))
                         : Value()};
}

FailureOr<Grads> negVJP(OpBuilder &b, Operation *op, Value grad,
                   ArrayRef<bool>) {
  return Grads{b.create<NegOp>(op->getLoc(), grad)};
}

//===----------------------------------------------------------------------===//
// step.mul
//===----------------------------------------------------------------------===//

FailureOr<Grads> mulVJP(OpBuilder &b, Operation *op, Value grad,
                   ArrayRef<bool> needed) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  return Grads{needed[0] ? Value(b.create<MulOp>(loc, grad, rhs)) : Value(),
         needed[1] ? Value(b.create<MulOp>(loc, grad, lhs)) : Value()};
}

//===----------------------------------------------------------------------===//
// step.relu: the gradient passes where x > 0 (zero at 0, as PyTorch)
//===----------------------------------------------------------------------===//

FailureOr<Grads> reluVJP(OpBuilder &b, Operation *op, Value grad,
                   ArrayRef<bool>) {
  Location loc = op->getLoc();
  Value x = op->getOperand(0);
  Value zero = splatLike(b, loc, x, 0.0);
  Value positive =
      b.create<CompareOp>(loc, ComparisonDirection::GT, x, zero);
  return Grads{b.create<SelectOp>(loc, positive, grad, splatLike(b, loc, grad, 0.0))};
}

} // namespace

void registerElementwiseRules(llvm::StringMap<VJPRule> &rules) {
  rules[AddOp::getOperationName()] = addVJP;
  rules[SubOp::getOperationName()] = subVJP;
  rules[NegOp::getOperationName()] = negVJP;
  rules[MulOp::getOperationName()] = mulVJP;
  rules[ReluOp::getOperationName()] = reluVJP;
}

} // namespace mlir::step::vjp
