//===- VJPShape.cpp - VJP rules of shape, reduction and matmul ops --------===//
//
// Shape ops move gradients without arithmetic (the inverse movement: a
// broadcast's gradient is a sum, a slice's is a pad with zeros, ...);
// reductions broadcast the gradient back; matmul uses two more matmuls.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

namespace mlir::step::vjp {
namespace {

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

FailureOr<Grads> broadcastVJP(OpBuilder &b, Operation *op, Value grad,
                   ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto bcast = cast<BroadcastInDimOp>(op);
  return Grads{sumToShape(b, op->getLoc(), grad, bcast.getOperand().getType(),
                    bcast.getBroadcastDimensions())};
}

//===----------------------------------------------------------------------===//
// step.reduce_sum
//===----------------------------------------------------------------------===//

FailureOr<Grads> reduceSumVJP(OpBuilder &b, Operation *op, Value grad,
                   ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto sum = cast<ReduceSumOp>(op);
  return Grads{broadcastBack(b, op->getLoc(), grad, sum.getOperand().getType(),
                       sum.getDims(), sum.getKeepdim())};
}

} // namespace

void registerShapeRules(llvm::StringMap<VJPRule> &rules) {
  rules[BroadcastInDimOp::getOperationName()] = broadcastVJP;
  rules[ReduceSumOp::getOperationName()] = reduceSumVJP;
}

} // namespace mlir::step::vjp
