//===- VJPNN.cpp - VJP rules of the neural-network step ops ---------------===//
//
// Rules for softmax, log_softmax, layer_norm, embedding, cross_entropy,
// dropout and attention, each the derivative PyTorch's autograd computes.
// Embedding, cross-entropy and attention use their fused backward ops
// (step.embedding_grad, step.cross_entropy_grad, step.attention_grad);
// dropout reapplies its own mask; the others are built from primitive ops.
//
// Like the forward kernels (StepNNOps.td: "f16/bf16 inputs are computed in
// f32"), the primitive-op rules compute in f32 and round each gradient once
// to its operand's type. Softmax-like rules reuse the forward result; the
// fused forward ops layer_norm and attention save nothing: layer_norm's rule
// recomputes the statistics (mean, rstd) from the operands (O(1) extra ops;
// step-remat and step-fuse decide later how the recomputation runs), and
// step.attention_grad recomputes the probabilities inside its kernel.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/VJP.h"
#include "dialects/step/VJPUtil.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mlir::step::vjp {
namespace {

//===----------------------------------------------------------------------===//
// Builders local to the NN rules
//===----------------------------------------------------------------------===//

/// `v` as f32: every rule built from primitive ops computes in f32.
Value asF32(OpBuilder &b, Location loc, Value v) {
  return castTo(b, loc, v, b.getF32Type());
}

/// `v` rounded once to the element type of `type` (an operand's type).
Value roundToType(OpBuilder &b, Location loc, Value v, Type type) {
  return castTo(b, loc, v, getElementTypeOrSelf(type));
}

/// `op(v, reduced over dims)` broadcast back to the shape of `v`: the
/// keepdim-and-expand pattern of every normalization backward.
template <typename ReduceOpT>
Value reduceBroadcast(OpBuilder &b, Location loc, Value v,
                      ArrayRef<int64_t> dims) {
  Value r = b.create<ReduceOpT>(loc, v, b.getDenseI64ArrayAttr(dims),
                                /*keepdim=*/false);
  return broadcastBack(b, loc, r, cast<RankedTensorType>(v.getType()), dims,
                       /*keepdim=*/false);
}

/// Dims [from, to) as a list.
SmallVector<int64_t> dimRange(int64_t from, int64_t to) {
  SmallVector<int64_t> dims(std::max<int64_t>(to - from, 0));
  std::iota(dims.begin(), dims.end(), from);
  return dims;
}

//===----------------------------------------------------------------------===//
// step.softmax: dx = y * (g - sum(g * y, dim))
//===----------------------------------------------------------------------===//

FailureOr<Grads> softmaxVJP(OpBuilder &b, Operation *op, Value grad,
                            ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto softmax = cast<SoftmaxOp>(op);
  Location loc = op->getLoc();
  Type xType = softmax.getOperand().getType();
  auto dim = static_cast<int64_t>(softmax.getDimension());
  // The forward result is saved for the backward (PyTorch saves it too).
  Value y = asF32(b, loc, softmax.getResult());
  Value g = asF32(b, loc, grad);
  Value dot =
      reduceBroadcast<ReduceSumOp>(b, loc, b.create<MulOp>(loc, g, y), {dim});
  Value dx = b.create<MulOp>(loc, y, b.create<SubOp>(loc, g, dot));
  return Grads{roundToType(b, loc, dx, xType)};
}

//===----------------------------------------------------------------------===//
// step.log_softmax: dx = g - exp(y) * sum(g, dim)
//===----------------------------------------------------------------------===//

FailureOr<Grads> logSoftmaxVJP(OpBuilder &b, Operation *op, Value grad,
                               ArrayRef<bool>) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto logSoftmax = cast<LogSoftmaxOp>(op);
  Location loc = op->getLoc();
  Type xType = logSoftmax.getOperand().getType();
  auto dim = static_cast<int64_t>(logSoftmax.getDimension());
  Value y = asF32(b, loc, logSoftmax.getResult());
  Value g = asF32(b, loc, grad);
  Value total = reduceBroadcast<ReduceSumOp>(b, loc, g, {dim});
  Value dx = b.create<SubOp>(
      loc, g, b.create<MulOp>(loc, b.create<ExpOp>(loc, y), total));
  return Grads{roundToType(b, loc, dx, xType)};
}

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

/// With xhat = (x - mean) * rstd over the trailing rank(weight) dims and
/// gx = g * weight (PyTorch's native_layer_norm_backward):
///   dx      = rstd * (gx - mean(gx) - xhat * mean(gx * xhat))
///   dweight = sum(g * xhat) over the leading dims
///   dbias   = sum(g) over the leading dims
/// mean and rstd are recomputed from x with the op's eps and the biased
/// variance, two-pass like the forward kernel.
FailureOr<Grads> layerNormVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool> needed) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto ln = cast<LayerNormOp>(op);
  Location loc = op->getLoc();
  auto xType = ln.getOperand().getType();
  auto wType = ln.getWeight().getType();
  int64_t rank = xType.getRank(), lead = rank - wType.getRank();
  SmallVector<int64_t> normDims = dimRange(lead, rank);
  SmallVector<int64_t> leadDims = dimRange(0, lead);
  Value g = asF32(b, loc, grad);
  // Sums over the leading dims give a tensor of the weight's shape.
  auto sumLead = [&](Value v) -> Value {
    if (leadDims.empty())
      return v;
    return b.create<ReduceSumOp>(loc, v, b.getDenseI64ArrayAttr(leadDims),
                                 /*keepdim=*/false);
  };

  Grads grads(3);
  if (needed[2])
    grads[2] = roundToType(b, loc, sumLead(g), wType);
  if (!needed[0] && !needed[1])
    return grads;

  LayerNormStatsValues st = buildLayerNormStats(
      b, loc, ln.getOperand(), wType.getRank(),
      ln.getEpsilon().convertToDouble());
  Value x = st.x, rstd = st.rstd, xhat = st.xhat;

  if (needed[1])
    grads[1] =
        roundToType(b, loc, sumLead(b.create<MulOp>(loc, g, xhat)), wType);
  if (needed[0]) {
    auto xF32 = cast<RankedTensorType>(x.getType());
    Value w =
        b.create<BroadcastInDimOp>(loc, xF32, asF32(b, loc, ln.getWeight()),
                                   b.getDenseI64ArrayAttr(normDims));
    Value gx = b.create<MulOp>(loc, g, w);
    Value meanGx = reduceBroadcast<ReduceMeanOp>(b, loc, gx, normDims);
    Value meanGxXhat = reduceBroadcast<ReduceMeanOp>(
        b, loc, b.create<MulOp>(loc, gx, xhat), normDims);
    // Two statements: the order of a call's arguments is unspecified, and
    // the IR must not depend on the host compiler.
    Value scaled = b.create<MulOp>(loc, xhat, meanGxXhat);
    Value inner =
        b.create<SubOp>(loc, b.create<SubOp>(loc, gx, meanGx), scaled);
    grads[0] = roundToType(b, loc, b.create<MulOp>(loc, rstd, inner), xType);
  }
  return grads;
}

//===----------------------------------------------------------------------===//
// step.embedding: scatter-add into the table; indices get no gradient
//===----------------------------------------------------------------------===//

FailureOr<Grads> embeddingVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool> needed) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto emb = cast<EmbeddingOp>(op);
  Grads grads(2);
  if (needed[1])
    grads[1] = b.create<EmbeddingGradOp>(
        op->getLoc(), emb.getIndices(), grad,
        b.getI64IntegerAttr(emb.getWeight().getType().getDimSize(0)));
  return grads;
}

//===----------------------------------------------------------------------===//
// step.cross_entropy: the fused softmax-gradient op
//===----------------------------------------------------------------------===//

FailureOr<Grads> crossEntropyVJP(OpBuilder &b, Operation *op, Value grad,
                                 ArrayRef<bool> needed) {
  auto ce = cast<CrossEntropyOp>(op);
  Grads grads(2);
  // Integer targets carry no gradient.
  if (needed[0])
    grads[0] = b.create<CrossEntropyGradOp>(
        op->getLoc(), ce.getLogits(), ce.getTargets(), grad, ce.getReduction(),
        ce.getIgnoreIndexAttr());
  return grads;
}

//===----------------------------------------------------------------------===//
// step.dropout: the same mask and scale, applied to the cotangent
//===----------------------------------------------------------------------===//

FailureOr<Grads> dropoutVJP(OpBuilder &b, Operation *op, Value grad,
                            ArrayRef<bool>) {
  // The mask depends only on (seed, element index) and the scale only on p,
  // so dropout(g) with equal attributes is exactly mask / (1 - p) * g, and
  // nothing of the forward is saved.
  auto dropout = cast<DropoutOp>(op);
  return Grads{b.create<DropoutOp>(op->getLoc(), grad, dropout.getOffset(),
                                   dropout.getPAttr(), dropout.getSeedAttr())};
}

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

/// One step.attention_grad: it recomputes the probabilities from q and k
/// row by row (flash-attention style), so no [..., Tq, Tk] tensor enters the
/// step, and gives all three gradients at once; a gradient that is not
/// needed is a result nobody reads. A `valid` length passes through: the
/// forward's padded rows are constants (0) and its padded keys have
/// probability 0, so nothing flows to or through them.
FailureOr<Grads> attentionVJP(OpBuilder &b, Operation *op, Value grad,
                              ArrayRef<bool> needed) {
  if (failed(requireStaticShapes(op)))
    return failure();
  auto attn = cast<AttentionOp>(op);
  auto g = b.create<AttentionGradOp>(
      op->getLoc(), attn.getQuery(), attn.getKey(), attn.getValue(), grad,
      attn.getValid(), /*out=*/Value(), /*lse=*/Value(), attn.getCausalAttr(),
      attn.getScaleAttr());
  Grads grads(3);
  for (unsigned i = 0; i < 3; ++i)
    if (needed[i])
      grads[i] = g->getResult(i);
  return grads;
}

} // namespace

void registerNNRules(llvm::StringMap<VJPRule> &rules) {
  rules[SoftmaxOp::getOperationName()] = softmaxVJP;
  rules[LogSoftmaxOp::getOperationName()] = logSoftmaxVJP;
  rules[LayerNormOp::getOperationName()] = layerNormVJP;
  rules[EmbeddingOp::getOperationName()] = embeddingVJP;
  rules[CrossEntropyOp::getOperationName()] = crossEntropyVJP;
  rules[DropoutOp::getOperationName()] = dropoutVJP;
  rules[AttentionOp::getOperationName()] = attentionVJP;
}

} // namespace mlir::step::vjp

namespace mlir::step {

LayerNormStatsValues buildLayerNormStats(OpBuilder &b, Location loc, Value x,
                                         int64_t normRank, double eps) {
  using namespace vjp;
  LayerNormStatsValues st;
  st.x = castTo(b, loc, x, b.getF32Type());
  auto type = cast<RankedTensorType>(st.x.getType());
  SmallVector<int64_t> &normDims = st.normDims;
  normDims = dimRange(type.getRank() - normRank, type.getRank());
  st.mean = b.create<ReduceMeanOp>(loc, st.x, b.getDenseI64ArrayAttr(normDims),
                                   /*keepdim=*/false);
  st.centered = b.create<SubOp>(
      loc, st.x, broadcastBack(b, loc, st.mean, type, normDims, false));
  Value var = b.create<ReduceMeanOp>(
      loc, b.create<MulOp>(loc, st.centered, st.centered),
      b.getDenseI64ArrayAttr(normDims), /*keepdim=*/false);
  st.rowRstd = b.create<RsqrtOp>(
      loc, b.create<AddOp>(loc, var, splatLike(b, loc, var, eps)));
  st.rstd = broadcastBack(b, loc, st.rowRstd, type, normDims, false);
  st.xhat = b.create<MulOp>(loc, st.centered, st.rstd);
  return st;
}

} // namespace mlir::step
