//===- Fusion.cpp - Fusion roles and the step.fusion verifier -------------===//

#include "dialects/step/Fusion.h"

#include "dialects/step/StepOps.h"

namespace mlir::step {

FusionRole fusionRole(Operation *op) {
  if (isa<NegOp, AbsOp, ReluOp, ExpOp, LogOp, TanhOp, SigmoidOp, SqrtOp,
          RsqrtOp, ErfOp, SinOp, CosOp, GeluOp, AddOp, SubOp, MulOp, DivOp,
          MaxOp, MinOp, PowOp, CompareOp, SelectOp, CastOp, DropoutOp,
          StopGradientOp>(op))
    return FusionRole::Elementwise;
  if (isa<BroadcastInDimOp, ReshapeOp, IotaOp>(op))
    return FusionRole::View;
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op))
    return FusionRole::Reduce;
  if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, CrossEntropyOp,
          CrossEntropyGradOp>(op))
    return FusionRole::RowOp;
  if (isa<SgdUpdateOp, AdamwUpdateOp, LambUpdateOp>(op))
    return FusionRole::Update;
  return FusionRole::None;
}

bool isCheapElementwise(Operation *op) {
  return isa<NegOp, AbsOp, ReluOp, AddOp, SubOp, MulOp, MaxOp, MinOp,
             CompareOp, SelectOp, CastOp, StopGradientOp>(op);
}

static int64_t numElements(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

LogicalResult FusionOp::verify() {
  StringRef kind = getKind();
  if (kind != kLoopFusion && kind != kReductionFusion &&
      kind != kMultiTensorFusion && kind != kMatmulFusion)
    return emitOpError("C1: kind must be \"loop\", \"reduction\", "
                       "\"multi_tensor\" or \"matmul\", found \"")
           << kind << "\"";
  Block &block = getBlock();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("C2: the body takes ")
           << block.getNumArguments() << " arguments for "
           << getInputs().size() << " inputs";
  for (auto [i, arg, in] :
       llvm::enumerate(block.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("C2: body argument ")
             << i << " has type " << arg.getType() << ", input " << i
             << " has type " << in.getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("C3: the body must end in step.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("C3: step.yield gives ")
           << yield.getValues().size()
           << " values whose types differ from the "
           << getNumResults() << " result types";
  for (Operation &op : block.without_terminator()) {
    if (!isa<StepDialect>(op.getDialect()) || isa<FusionOp, ConstantOp>(op))
      return emitOpError("C4: '")
             << op.getName() << "' cannot be inside a fusion";
    if (kind == kLoopFusion) {
      FusionRole role = fusionRole(&op);
      if (role != FusionRole::Elementwise && role != FusionRole::View)
        return emitOpError("C5: a loop fusion holds elementwise ops, "
                           "broadcast_in_dim, reshape and iota, found '")
               << op.getName() << "'";
    }
  }
  if (kind == kLoopFusion && getNumResults() > 0) {
    int64_t n = numElements(getResult(0).getType());
    for (auto [i, r] : llvm::enumerate(getResults()))
      if (numElements(r.getType()) != n)
        return emitOpError("C5: result ")
               << i << " has " << numElements(r.getType())
               << " elements, result 0 has " << n;
  }
  return success();
}

} // namespace mlir::step
