//===- VJP.cpp - The table of VJP rules -----------------------------------===//

#include "dialects/step/VJP.h"

#include "dialects/step/StepOps.h"

namespace mlir::step {

bool isDifferentiableType(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

bool isNonDifferentiable(Operation *op) {
  // check_finite's i1 result would be caught below too; it is listed so
  // that the op stays non-differentiable whatever its result type becomes.
  if (isa<CompareOp, IotaOp, ConstantOp, StopGradientOp, CheckFiniteOp>(op))
    return true;
  return llvm::none_of(op->getResultTypes(), isDifferentiableType);
}

static const llvm::StringMap<VJPRule> &ruleTable() {
  static const llvm::StringMap<VJPRule> table = [] {
    llvm::StringMap<VJPRule> rules;
    vjp::registerElementwiseRules(rules);
    vjp::registerShapeRules(rules);
    vjp::registerNNRules(rules);
    vjp::registerDistRules(rules);
    return rules;
  }();
  return table;
}

VJPRule lookupVJPRule(Operation *op) {
  return ruleTable().lookup(op->getName().getStringRef());
}

} // namespace mlir::step
