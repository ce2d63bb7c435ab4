//===- TypeInferenceTrain.cpp - Inference for gradient/optimizer ops ------===//
//
// Result-type inference and verifiers of the ops in StepTrainOps.td. Same
// conventions as TypeInference.cpp: every message names the op, the
// constraint and the offending types.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"

using namespace mlir;
using namespace mlir::step;

//===----------------------------------------------------------------------===//
// step.embedding_grad
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto idx = cast<RankedTensorType>(adaptor.getIndices().getType());
  auto grad = cast<RankedTensorType>(adaptor.getGrad().getType());
  bool shapeOk = grad.getRank() == idx.getRank() + 1;
  for (int64_t i = 0; shapeOk && i < idx.getRank(); ++i)
    shapeOk = dimsAgree(idx.getDimSize(i), grad.getDimSize(i));
  if (!shapeOk)
    return fail(loc, name, "grad ", quoted(grad),
                " must have the shape of indices ", quoted(idx),
                " plus a trailing D (C1)");
  int64_t v = static_cast<int64_t>(adaptor.getNumEmbeddings());
  if (v < 1)
    return fail(loc, name, "num_embeddings = ", v, " must be >= 1 (C2)");
  inferred.push_back(RankedTensorType::get(
      {v, grad.getDimSize(grad.getRank() - 1)}, grad.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.cross_entropy_grad
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  auto targets = cast<RankedTensorType>(adaptor.getTargets().getType());
  auto grad = cast<RankedTensorType>(adaptor.getGrad().getType());
  if (logits.getRank() != 2 || targets.getRank() != 1 ||
      !dimsAgree(logits.getDimSize(0), targets.getDimSize(0)))
    return fail(loc, name, "expects logits [N, C] and targets [N], found ",
                quoted(logits), " and ", quoted(targets), " (C1)");
  bool none = adaptor.getReduction() == LossReduction::None;
  bool gradOk = grad.getElementType() == logits.getElementType() &&
                (none ? grad.getRank() == 1 &&
                            dimsAgree(grad.getDimSize(0), logits.getDimSize(0))
                      : grad.getRank() == 0);
  if (!gradOk)
    return fail(loc, name, "grad ", quoted(grad), " must be ",
                none ? "[N]" : "a scalar", " of the logits' element type for ",
                "logits ", quoted(logits), " (C2)");
  inferred.push_back(logits);
  return success();
}

//===----------------------------------------------------------------------===//
// step.check_finite
//===----------------------------------------------------------------------===//

LogicalResult CheckFiniteOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  if (operands.empty())
    return fail(loc, name, "needs at least one operand (C1)");
  // C2 is also the ODS operand constraint, but the custom parser infers the
  // result type before the verifier checks operands: report it here first.
  for (auto [i, v] : llvm::enumerate(operands)) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    Type e = t ? t.getElementType() : Type();
    if (!e || !(e.isF32() || e.isF16() || e.isBF16()))
      return fail(loc, name, "operand #", static_cast<int64_t>(i), " ",
                  quoted(v.getType()),
                  " must be a ranked f32, f16 or bf16 tensor (C2)");
  }
  inferred.push_back(RankedTensorType::get({}, IntegerType::get(ctx, 1)));
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// C1 of every update op: the per-parameter tensors share `param`'s type.
static LogicalResult checkSameAsParam(Operation *op, Value param,
                                      ArrayRef<std::pair<StringRef, Value>>
                                          others) {
  for (auto [what, v] : others)
    if (v && v.getType() != param.getType())
      return op->emitOpError()
             << what << " " << quoted(v.getType()) << " must have the type "
             << quoted(param.getType()) << " of param (C1)";
  return success();
}

static LogicalResult checkAdamHyper(Operation *op, double beta1, double beta2,
                                    double eps, double wd) {
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return op->emitOpError() << "betas (" << beta1 << ", " << beta2
                             << ") must be in [0, 1) (C3)";
  if (!(eps > 0))
    return op->emitOpError() << "eps = " << eps << " must be > 0 (C3)";
  if (!(wd >= 0))
    return op->emitOpError()
           << "weight_decay = " << wd << " must be >= 0 (C3)";
  return success();
}

LogicalResult SgdUpdateOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  inferred.push_back(adaptor.getParam().getType());
  if (adaptor.getMomentumBuffer())
    inferred.push_back(adaptor.getMomentumBuffer().getType());
  return success();
}

LogicalResult SgdUpdateOp::verify() {
  if (failed(checkSameAsParam(*this, getParam(),
                              {{"grad", getGrad()},
                               {"momentum_buffer", getMomentumBuffer()}})))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0) || !(getWeightDecay().convertToDouble() >= 0))
    return emitOpError() << "momentum and weight_decay must be >= 0";
  if ((momentum != 0) != static_cast<bool>(getMomentumBuffer()))
    return emitOpError() << "has momentum = " << momentum << " "
                         << (getMomentumBuffer() ? "and" : "but no")
                         << " momentum_buffer; the buffer is present iff "
                            "momentum != 0 (C3)";
  if (getNesterov() &&
      (momentum <= 0 || getDampening().convertToDouble() != 0))
    return emitOpError() << "nesterov needs momentum > 0 and dampening = 0 "
                            "(C4)";
  return success();
}

#define STEP_ADAM_LIKE(Op)                                                     \
  LogicalResult Op::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location>, ValueRange operands,             \
      DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,       \
      SmallVectorImpl<Type> &inferred) {                                       \
    Adaptor adaptor(operands, attrs, props, regions);                          \
    inferred.append(3, adaptor.getParam().getType());                          \
    return success();                                                          \
  }                                                                            \
  LogicalResult Op::verify() {                                                 \
    return checkAdamHyper(*this, getBeta1().convertToDouble(),                 \
                          getBeta2().convertToDouble(),                        \
                          getEps().convertToDouble(),                          \
                          getWeightDecay().convertToDouble());                 \
  }

STEP_ADAM_LIKE(AdamwUpdateOp)
STEP_ADAM_LIKE(LambUpdateOp)
#undef STEP_ADAM_LIKE

//===----------------------------------------------------------------------===//
// step.offload, step.reload
//===----------------------------------------------------------------------===//

LogicalResult OffloadOp::verify() {
  for (Operation *user : getResult().getUsers())
    if (!isa<ReloadOp, func::ReturnOp>(user) && !user->hasAttr("step.host"))
      return emitOpError("C2: the host value may only be read by "
                         "step.reload, step.host ops and a function's "
                         "return, found a use by '")
             << user->getName() << "'";
  return success();
}

LogicalResult ReloadOp::verify() {
  if (!isHostValue(getOperand()))
    return emitOpError("C2: the operand must be a host value (the result "
                       "of step.offload or of a step.host op, or a "
                       "step.memory = \"host\" argument)");
  if ((*this)->getParentOfType<FusionOp>())
    return emitOpError("C3: may not be inside a step.fusion");
  return success();
}
