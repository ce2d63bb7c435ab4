//===- TypeInferenceNN.cpp - Inference for matmul and nn ops --------------===//
//
// Result-type inference and verifiers of step.matmul and the neural-network
// ops (softmax family, layer_norm, embedding, cross_entropy, dropout,
// attention and its gradient op attention_grad). Same conventions as
// TypeInference.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"

using namespace mlir;
using namespace mlir::step;

namespace {
/// Two agreeing dims as one: the static size when either is static (the
/// same rule as elementwise ops).
int64_t joined(int64_t a, int64_t b) { return ShapedType::isDynamic(a) ? b : a; }
} // namespace

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  int64_t rank = lhs.getRank();
  if (rank < 2)
    return fail(loc, name, "lhs ", quoted(lhs), " must have rank >= 2 (C1)");
  if (rhs.getRank() != rank && rhs.getRank() != 2)
    return fail(loc, name, "rhs ", quoted(rhs), " must have rank 2",
                rank == 2 ? "" : (" or the rank of lhs " + quoted(lhs)),
                " (C2)");
  if (lhs.getElementType() != rhs.getElementType())
    return fail(loc, name, "lhs ", quoted(lhs), " and rhs ", quoted(rhs),
                " have different element types (C3)");
  int64_t batch = rank - 2, rb = rhs.getRank() - 2;
  SmallVector<int64_t> shape(lhs.getShape().take_front(batch));
  if (rhs.getRank() == rank)
    for (int64_t i = 0; i < batch; ++i) {
      if (!dimsAgree(lhs.getDimSize(i), rhs.getDimSize(i)))
        return fail(loc, name, "batch dim ", i, " differs: lhs ", quoted(lhs),
                    ", rhs ", quoted(rhs), " (C4)");
      shape[i] = joined(lhs.getDimSize(i), rhs.getDimSize(i));
    }
  bool ta = adaptor.getTransposeA(), tb = adaptor.getTransposeB();
  int64_t m = lhs.getDimSize(batch + (ta ? 1 : 0));
  int64_t kl = lhs.getDimSize(batch + (ta ? 0 : 1));
  int64_t kr = rhs.getDimSize(rb + (tb ? 1 : 0));
  int64_t n = rhs.getDimSize(rb + (tb ? 0 : 1));
  if (!dimsAgree(kl, kr))
    return fail(loc, name, "contracting dims differ: lhs ", quoted(lhs),
                ta ? " (transposed)" : "", " has K = ", kl, ", rhs ",
                quoted(rhs), tb ? " (transposed)" : "", " has K = ", kr,
                " (C5)");
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.softmax, step.log_softmax
//===----------------------------------------------------------------------===//

static LogicalResult verifySoftmaxDim(Operation *op, RankedTensorType type,
                                      int64_t dim) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError("dim ") << dim << " is outside [0, "
                                   << type.getRank() << ") for operand "
                                   << quoted(type) << " (C1)";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getOperand().getType(), getDimension());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getOperand().getType(), getDimension());
}

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto x = cast<RankedTensorType>(adaptor.getOperand().getType());
  auto w = cast<RankedTensorType>(adaptor.getWeight().getType());
  auto b = cast<RankedTensorType>(adaptor.getBias().getType());
  if (w.getRank() < 1 || w.getRank() > x.getRank())
    return fail(loc, name, "weight ", quoted(w), " must have rank in [1, ",
                x.getRank(), "] for operand ", quoted(x), " (C1)");
  int64_t offset = x.getRank() - w.getRank();
  for (int64_t i = 0; i < w.getRank(); ++i)
    if (!dimsAgree(w.getDimSize(i), x.getDimSize(offset + i)))
      return fail(loc, name, "weight ", quoted(w),
                  " must equal the trailing dims of operand ", quoted(x),
                  " (C2)");
  SmallVector<int64_t> shape(x.getShape());
  for (int64_t i = 0; i < w.getRank(); ++i)
    shape[offset + i] = joined(x.getDimSize(offset + i), w.getDimSize(i));
  if (b.getShape() != w.getShape())
    return fail(loc, name, "bias ", quoted(b), " must have the shape of weight ",
                quoted(w), " (C3)");
  if (w.getElementType() != x.getElementType() ||
      b.getElementType() != x.getElementType())
    return fail(loc, name, "operand ", quoted(x), ", weight ", quoted(w),
                " and bias ", quoted(b), " need one element type (C4)");
  if (!(adaptor.getEpsilon().convertToDouble() > 0.0))
    return fail(loc, name, "eps ", adaptor.getEpsilon().convertToDouble(),
                " must be > 0 (C5)");
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.embedding
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto idx = cast<RankedTensorType>(adaptor.getIndices().getType());
  auto w = cast<RankedTensorType>(adaptor.getWeight().getType());
  if (w.getRank() != 2)
    return fail(loc, getOperationName(), "weight ", quoted(w),
                " must have rank 2 ([V, D]) (C1)");
  SmallVector<int64_t> shape(idx.getShape());
  shape.push_back(w.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, w.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto logits = cast<RankedTensorType>(adaptor.getLogits().getType());
  auto targets = cast<RankedTensorType>(adaptor.getTargets().getType());
  if (logits.getRank() != 2 || targets.getRank() != 1)
    return fail(loc, name, "expects logits [N, C] and targets [N], found ",
                quoted(logits), " and ", quoted(targets), " (C1)");
  if (!dimsAgree(logits.getDimSize(0), targets.getDimSize(0)))
    return fail(loc, name, "logits ", quoted(logits), " and targets ",
                quoted(targets), " disagree on N (C2)");
  if (adaptor.getReduction() == LossReduction::None)
    inferred.push_back(RankedTensorType::get(
        {joined(logits.getDimSize(0), targets.getDimSize(0))},
        logits.getElementType()));
  else
    inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError("p = ") << p << " must be in [0, 1) (C1)";
  if (Value offset = getOffset()) {
    auto t = cast<RankedTensorType>(offset.getType());
    if (t.getRank() != 0 || !t.getElementType().isInteger(64))
      return emitOpError("offset must be tensor<i64>, found ")
             << offset.getType() << " (C2)";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

namespace {
/// Checks C1-C4 of step.attention (shared by step.attention_grad) and
/// returns the attention result's type.
FailureOr<RankedTensorType> attentionResultType(std::optional<Location> loc,
                                                StringRef name, Value query,
                                                Value key, Value value,
                                                std::optional<APFloat> scale) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  int64_t rank = q.getRank();
  if (rank < 2 || k.getRank() != rank || v.getRank() != rank)
    return fail(loc, name, "query ", quoted(q), ", key ", quoted(k),
                " and value ", quoted(v), " need one rank >= 2 (C1)");
  if (k.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return fail(loc, name, "query ", quoted(q), ", key ", quoted(k),
                " and value ", quoted(v), " need one element type (C2)");
  for (int64_t i = 0; i < rank - 2; ++i)
    if (!dimsAgree(q.getDimSize(i), k.getDimSize(i)) ||
        !dimsAgree(q.getDimSize(i), v.getDimSize(i)))
      return fail(loc, name, "leading dim ", i, " differs among query ",
                  quoted(q), ", key ", quoted(k), ", value ", quoted(v),
                  " (C3)");
  if (!dimsAgree(q.getDimSize(rank - 1), k.getDimSize(rank - 1)))
    return fail(loc, name, "query ", quoted(q), " and key ", quoted(k),
                " disagree on the head dim D (C3)");
  if (!dimsAgree(k.getDimSize(rank - 2), v.getDimSize(rank - 2)))
    return fail(loc, name, "key ", quoted(k), " and value ", quoted(v),
                " disagree on the key length Tk (C3)");
  if (scale && !(scale->convertToDouble() > 0))
    return fail(loc, name, "scale ", scale->convertToDouble(),
                " must be > 0 (C4)");
  SmallVector<int64_t> shape(q.getShape());
  for (int64_t i = 0; i < rank - 2; ++i)
    shape[i] = joined(joined(q.getDimSize(i), k.getDimSize(i)),
                      v.getDimSize(i));
  shape.back() = v.getDimSize(rank - 1);
  return RankedTensorType::get(shape, q.getElementType());
}
/// The type of an attention's per-row log-sum-exp: f32, the result's shape
/// without its last dim.
RankedTensorType lseType(RankedTensorType result) {
  return RankedTensorType::get(result.getShape().drop_back(),
                               Float32Type::get(result.getContext()));
}

/// Whether `a` is `b` where static dims agree (a `?` agrees with any size).
bool sameTypeUpToDynamic(Type a, RankedTensorType b) {
  auto t = cast<RankedTensorType>(a);
  bool same =
      t.getRank() == b.getRank() && t.getElementType() == b.getElementType();
  for (int64_t i = 0; same && i < t.getRank(); ++i)
    same = dimsAgree(t.getDimSize(i), b.getDimSize(i));
  return same;
}
} // namespace

LogicalResult AttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto type = attentionResultType(loc, getOperationName(), adaptor.getQuery(),
                                  adaptor.getKey(), adaptor.getValue(),
                                  adaptor.getScale());
  if (failed(type))
    return failure();
  inferred.push_back(*type);
  return success();
}

//===----------------------------------------------------------------------===//
// step.attention_grad
//===----------------------------------------------------------------------===//

LogicalResult AttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,
    SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  StringRef name = getOperationName();
  auto type = attentionResultType(loc, name, adaptor.getQuery(),
                                  adaptor.getKey(), adaptor.getValue(),
                                  adaptor.getScale());
  if (failed(type))
    return failure();
  if (!sameTypeUpToDynamic(adaptor.getGrad().getType(), *type))
    return fail(loc, name, "grad ", quoted(adaptor.getGrad().getType()),
                " must have the attention result's type ", quoted(*type),
                " (C5)");
  if (Value out = adaptor.getOut()) {
    RankedTensorType lse = lseType(*type);
    if (!sameTypeUpToDynamic(out.getType(), *type) ||
        !sameTypeUpToDynamic(adaptor.getLse().getType(), lse))
      return fail(loc, name, "saved ", quoted(out.getType()), ", ",
                  quoted(adaptor.getLse().getType()),
                  " must be the attention's result and log-sum-exp, ",
                  quoted(*type), ", ", quoted(lse), " (C7)");
  }
  for (Value v : {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()})
    inferred.push_back(v.getType());
  return success();
}

//===----------------------------------------------------------------------===//
// step.attention_lse
//===----------------------------------------------------------------------===//

LogicalResult
AttentionLseOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 ValueRange operands, DictionaryAttr attrs,
                                 OpaqueProperties props, RegionRange regions,
                                 SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto type = attentionResultType(loc, getOperationName(), adaptor.getQuery(),
                                  adaptor.getKey(), adaptor.getValue(),
                                  adaptor.getScale());
  if (failed(type))
    return failure();
  inferred.push_back(*type);
  inferred.push_back(lseType(*type));
  return success();
}
