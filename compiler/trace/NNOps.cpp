//===- NNOps.cpp - Tracing matmul and the neural-network ops --------------===//
//
// torch.matmul's rank rules on top of step.matmul (which takes rank >= 2
// operands with equal batch dims, or a rank-2 rhs shared by every batch), and
// the composite nn ops, each kept whole as one step op. Arguments are checked
// with the user's shapes first; the op's own inference is the backstop.
//
//===----------------------------------------------------------------------===//

#include "compiler/trace/GraphState.h"
#include "compiler/trace/Ops.h"

#include "llvm/ADT/STLExtras.h"

namespace step::trace {

using namespace detail;
namespace ops = mlir::step;

namespace {
void requireFloat(llvm::StringRef op, const std::string &what,
                  const Tensor &x, const SourceLoc &loc) {
  if (!isFloat(x.dtype()))
    dtypeError(op,
               what + " must be a float tensor (f32, f16, bf16), got " +
                   rt::dtypeName(x.dtype()) + " " + shapeOf(x),
               loc);
}

void requireInt(llvm::StringRef op, const std::string &what, const Tensor &x,
                const SourceLoc &loc) {
  if (x.dtype() != DType::I32 && x.dtype() != DType::I64)
    dtypeError(op,
               what + " must be an integer tensor (i32, i64), got " +
                   rt::dtypeName(x.dtype()) + " " + shapeOf(x),
               loc);
}

llvm::SmallVector<int64_t> concatDims(llvm::ArrayRef<int64_t> a,
                                      llvm::ArrayRef<int64_t> b) {
  llvm::SmallVector<int64_t> out(a.begin(), a.end());
  out.append(b.begin(), b.end());
  return out;
}
} // namespace

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

Tensor matmul(const Tensor &a, const Tensor &b, SourceLoc loc) {
  GraphState &g = graphOf("matmul", {a, b}, loc);
  std::string shapes = shapeOf(a) + " @ " + shapeOf(b);
  if (a.rank() == 0 || b.rank() == 0)
    shapeError("matmul", "both arguments need at least 1 dim, got " + shapes,
               loc);
  DType dtype = promoteTypes(a.dtype(), b.dtype());
  if (!isFloat(dtype))
    dtypeError("matmul",
               std::string("needs float operands, got ") +
                   rt::dtypeName(a.dtype()) + " @ " + rt::dtypeName(b.dtype()),
               loc);
  auto da = dimsOf(a.value()), db = dimsOf(b.value());
  int64_t ka = da.back(), kb = b.rank() == 1 ? db[0] : db[db.size() - 2];
  if (!ops::dimsAgree(ka, kb))
    shapeError("matmul", "contracting dims differ: " + shapes, loc);

  // torch.matmul: a 1-D lhs is a row [1, K], a 1-D rhs a column [K, 1], and
  // the added dim is removed from the result.
  mlir::Value va = castTo(g, a.value(), dtype, loc, "matmul");
  mlir::Value vb = castTo(g, b.value(), dtype, loc, "matmul");
  bool dropM = a.rank() == 1, dropN = b.rank() == 1;
  if (dropM)
    va = reshapeTo(g, va, {1, ka}, loc, "matmul");
  if (dropN)
    vb = reshapeTo(g, vb, {kb, 1}, loc, "matmul");

  auto la = dimsOf(va), lb = dimsOf(vb);
  auto batchA = la.drop_back(2), batchB = lb.drop_back(2);
  auto matA = la.take_back(2), matB = lb.take_back(2);
  std::vector<int64_t> batch;
  try {
    batch = broadcastShapes("matmul", {batchA.vec(), batchB.vec()}, loc);
  } catch (const ShapeError &) {
    shapeError("matmul", "batch dims cannot broadcast: " + shapes, loc);
  }
  // A rhs without real batch dims is one matrix for every batch: the op's
  // rank-2 rhs form shares it without a broadcast copy.
  bool shared = llvm::all_of(batchB, [](int64_t d) { return d == 1; });
  if (shared) {
    vb = reshapeTo(g, vb, matB, loc, "matmul");
    va = broadcastTo(g, va, concatDims(batch, matA), loc, "matmul");
  } else {
    va = broadcastTo(g, va, concatDims(batch, matA), loc, "matmul");
    vb = broadcastTo(g, vb, concatDims(batch, matB), loc, "matmul");
  }
  mlir::Value r =
      g.create<ops::MatmulOp>(loc, "matmul", va.getType(), va, vb);
  if (dropM || dropN) {
    llvm::SmallVector<int64_t> shape(dimsOf(r));
    if (dropN)
      shape.erase(shape.end() - 1);
    if (dropM)
      shape.erase(shape.end() - (dropN ? 1 : 2));
    r = reshapeTo(g, r, shape, loc, "matmul");
  }
  return wrap(g, r);
}

Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b,
              SourceLoc loc) {
  Tensor y = matmul(x, w, loc);
  return b ? add(y, b, loc) : y;
}

//===----------------------------------------------------------------------===//
// step.softmax, step.log_softmax, step.layer_norm
//===----------------------------------------------------------------------===//

namespace {
template <typename OpTy>
Tensor softmaxLike(llvm::StringRef name, const Tensor &x, int64_t dim,
                   const SourceLoc &loc) {
  GraphState &g = graphOf(name, {x}, loc);
  requireFloat(name, "the input", x, loc);
  int64_t d = normalizeDim(name, dim, x.rank(), dimsOf(x.value()), loc);
  return wrap(g, g.create<OpTy>(loc, name, x.value().getType(), x.value(),
                                static_cast<uint64_t>(d)));
}
} // namespace

Tensor softmax(const Tensor &x, int64_t dim, SourceLoc loc) {
  return softmaxLike<ops::SoftmaxOp>("softmax", x, dim, loc);
}

Tensor log_softmax(const Tensor &x, int64_t dim, SourceLoc loc) {
  return softmaxLike<ops::LogSoftmaxOp>("log_softmax", x, dim, loc);
}

Tensor layer_norm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                  double eps, SourceLoc loc) {
  GraphState &g = bias ? graphOf("layer_norm", {x, weight, bias}, loc)
                       : graphOf("layer_norm", {x, weight}, loc);
  requireFloat("layer_norm", "the input", x, loc);
  auto dx = dimsOf(x.value()), dw = dimsOf(weight.value());
  if (weight.rank() < 1 || weight.rank() > x.rank() ||
      !llvm::all_of(llvm::zip(dw, dx.take_back(dw.size())), [](auto p) {
        return ops::dimsAgree(std::get<0>(p), std::get<1>(p));
      }))
    shapeError("layer_norm",
               "weight " + shapeOf(weight) +
                   " must equal the trailing dims of the input " + shapeOf(x),
               loc);
  if (bias && dimsOf(bias.value()) != dw)
    shapeError("layer_norm",
               "bias " + shapeOf(bias) + " must have the shape of weight " +
                   shapeOf(weight),
               loc);
  for (const Tensor *t : {&weight, &bias})
    if (*t && t->dtype() != x.dtype())
      dtypeError("layer_norm",
                 std::string("input, weight and bias need one dtype, got ") +
                     rt::dtypeName(x.dtype()) + ", " +
                     rt::dtypeName(weight.dtype()) +
                     (bias ? std::string(", ") + rt::dtypeName(bias.dtype())
                           : std::string()),
                 loc);
  if (!(eps > 0))
    throw TraceError("layer_norm: eps must be > 0, got " +
                     std::to_string(eps) + where(loc));
  mlir::Value b = bias ? bias.value()
                       : splat(g, Scalar(0.0), x.dtype(), dw, loc, "layer_norm");
  return wrap(g, g.create<ops::LayerNormOp>(loc, "layer_norm",
                                            x.value().getType(), x.value(),
                                            weight.value(), b,
                                            llvm::APFloat(eps)));
}

//===----------------------------------------------------------------------===//
// step.embedding, step.cross_entropy
//===----------------------------------------------------------------------===//

Tensor embedding(const Tensor &indices, const Tensor &weight, SourceLoc loc) {
  GraphState &g = graphOf("embedding", {indices, weight}, loc);
  requireInt("embedding", "indices", indices, loc);
  requireFloat("embedding", "the weight", weight, loc);
  if (weight.rank() != 2)
    shapeError("embedding",
               "weight must be a [V, D] table, got " + shapeOf(weight), loc);
  return wrap(g, g.create<ops::EmbeddingOp>(loc, "embedding",
                                            weight.value().getType(),
                                            indices.value(), weight.value()));
}

Tensor cross_entropy(const Tensor &logits, const Tensor &targets,
                     Reduction reduction, int64_t ignore_index,
                     SourceLoc loc) {
  GraphState &g = graphOf("cross_entropy", {logits, targets}, loc);
  requireFloat("cross_entropy", "logits", logits, loc);
  requireInt("cross_entropy", "targets", targets, loc);
  auto dl = dimsOf(logits.value()), dt = dimsOf(targets.value());
  auto expected = dl.drop_back(logits.rank() > 0 ? 1 : 0);
  if (logits.rank() == 0 || dt.size() != expected.size() ||
      !llvm::all_of(llvm::zip(dt, expected), [](auto p) {
        return ops::dimsAgree(std::get<0>(p), std::get<1>(p));
      }))
    shapeError("cross_entropy",
               "targets " + shapeOf(targets) + " do not fit logits " +
                   shapeOf(logits) + " (expected targets of shape " +
                   shapeStr(expected) + ", classes in the last dim)",
               loc);
  // step.cross_entropy takes [N, C] and [N]: flatten the leading dims (or
  // add N = 1 for an unbatched [C] / [] pair).
  Tensor l = logits, t = targets;
  if (logits.rank() != 2) {
    l = reshape(logits, {-1, logits.shape().back()}, loc);
    t = reshape(targets, {-1}, loc);
  }
  ops::LossReduction r = reduction == Reduction::None ? ops::LossReduction::None
                         : reduction == Reduction::Sum
                             ? ops::LossReduction::Sum
                             : ops::LossReduction::Mean;
  // Omitting PyTorch's default keeps the printed IR short.
  mlir::IntegerAttr ignore =
      ignore_index == -100 ? mlir::IntegerAttr()
                           : g.builder.getI64IntegerAttr(ignore_index);
  Tensor loss = wrap(g, g.create<ops::CrossEntropyOp>(
                            loc, "cross_entropy", l.value().getType(),
                            l.value(), t.value(), r, ignore));
  if (reduction == Reduction::None && logits.rank() != 2)
    loss = wrap(g, reshapeTo(g, loss.value(), dt, loc, "cross_entropy"));
  return loss;
}

//===----------------------------------------------------------------------===//
// step.dropout, step.attention
//===----------------------------------------------------------------------===//

Tensor dropout(const Tensor &x, double p, int64_t seed, SourceLoc loc) {
  GraphState &g = graphOf("dropout", {x}, loc);
  requireFloat("dropout", "the input", x, loc);
  if (!(p >= 0 && p < 1))
    throw TraceError("dropout: p must be in [0, 1), got " + std::to_string(p) +
                     where(loc));
  if (p == 0)
    return x;
  return wrap(g, g.create<ops::DropoutOp>(loc, "dropout", x.value().getType(),
                                          x.value(), mlir::Value(),
                                          llvm::APFloat(p),
                                          static_cast<uint64_t>(seed)));
}

Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, bool causal,
                                    std::optional<double> scale,
                                    SourceLoc loc) {
  llvm::StringRef name = "scaled_dot_product_attention";
  GraphState &g = graphOf(name, {q, k, v}, loc);
  std::string shapes = "query " + shapeOf(q) + ", key " + shapeOf(k) +
                       ", value " + shapeOf(v);
  for (const Tensor *t : {&q, &k, &v})
    requireFloat(name, "each of query, key, value", *t, loc);
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    dtypeError(name,
               std::string("query, key and value need one dtype, got ") +
                   rt::dtypeName(q.dtype()) + ", " + rt::dtypeName(k.dtype()) +
                   ", " + rt::dtypeName(v.dtype()),
               loc);
  int64_t rank = q.rank();
  if (rank < 2 || k.rank() != rank || v.rank() != rank)
    shapeError(name, "needs one rank >= 2 for " + shapes, loc);
  auto dq = dimsOf(q.value()), dk = dimsOf(k.value()), dv = dimsOf(v.value());
  for (int64_t i = 0; i < rank - 2; ++i)
    if (!ops::dimsAgree(dq[i], dk[i]) || !ops::dimsAgree(dq[i], dv[i]))
      shapeError(name, "leading dim " + std::to_string(i) + " differs: " + shapes,
                 loc);
  if (!ops::dimsAgree(dq[rank - 1], dk[rank - 1]))
    shapeError(name, "query and key disagree on the head dim: " + shapes, loc);
  if (!ops::dimsAgree(dk[rank - 2], dv[rank - 2]))
    shapeError(name, "key and value disagree on the key length: " + shapes,
               loc);
  if (scale && !(*scale > 0))
    throw TraceError(name.str() + ": scale must be > 0, got " +
                     std::to_string(*scale) + where(loc));
  mlir::FloatAttr s = scale ? g.builder.getF64FloatAttr(*scale) : nullptr;
  return wrap(g, g.create<ops::AttentionOp>(loc, name, q.value().getType(),
                                            q.value(), k.value(), v.value(),
                                            mlir::Value(), causal, s));
}

} // namespace step::trace
