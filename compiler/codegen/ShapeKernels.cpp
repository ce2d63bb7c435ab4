//===- ShapeKernels.cpp - Data movement: broadcast, transpose, slice, ... -===//
//
// One thread per output element (grid-stride): the flat output index is
// decomposed over the output shape with constant divisors (the compiler
// turns them into multiply-shifts) and the source offset is accumulated
// with constant strides, so writes are coalesced and reads are as
// contiguous as the op allows (a transpose that keeps the innermost dim,
// like the attention head split, reads contiguously too). Values are moved,
// never converted, so every dtype works. embedding is a row gather,
// vectorized by 4 when D allows.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include "dialects/step/StepOps.h"

namespace step::codegen::detail {

namespace ops = mlir::step;

namespace {
/// The frame every kernel of this file shares: a grid-stride loop over the
/// output index `o` around `body`, with `r` (a copy of o) and `src` (0 plus
/// `base`) declared.
KernelSource gather(mlir::Operation *op, const std::string &name,
                    const std::string &body, int64_t base = 0) {
  KernelSource ks;
  ks.name = name;
  ks.blockX = 256;
  PreludeNeeds needs;
  std::string params = paramList(op, ks, needs, /*restrict=*/true);
  int64_t n = numelOf(op->getResult(0));
  ks.gridX = gridFor(n, ks.blockX);
  std::string I = idxType(n);
  ks.source = prelude(needs) + signature(ks, params) + " {\n" +
              subst("  for ($I o = ($I)blockIdx.x * blockDim.x + threadIdx.x; "
                    "o < $N; o += ($I)gridDim.x * blockDim.x) {\n"
                    "    $I r = o;\n"
                    "    long long src = $BASE;\n",
                    {{"I", I}, {"N", std::to_string(n)},
                     {"BASE", std::to_string(base)}}) +
              body + "  }\n}\n";
  return ks;
}

/// A gather whose source offset is a sum of coordinate * stride.
KernelSource stridedGather(mlir::Operation *op, const std::string &name,
                           const std::vector<int64_t> &srcStrides,
                           int64_t base = 0) {
  std::string body = decompose("r", "src", shapeOf(op->getResult(0)),
                               srcStrides) +
                     "    (void)r;\n    out0[o] = in0[src];\n";
  return gather(op, name, body, base);
}
} // namespace

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim, step.transpose, step.slice
//===----------------------------------------------------------------------===//

static KernelSource emitBroadcast(ops::BroadcastInDimOp op,
                                  const std::string &name) {
  std::vector<int64_t> in = shapeOf(op.getOperand());
  std::vector<int64_t> inStrides = stridesOf(in);
  std::vector<int64_t> src(shapeOf(op.getResult()).size(), 0);
  auto dims = op.getBroadcastDimensions();
  for (size_t k = 0; k < dims.size(); ++k)
    if (in[k] != 1) // a size-1 dim repeats: stride 0
      src[dims[k]] = inStrides[k];
  return stridedGather(op, name, src);
}

static KernelSource emitTranspose(ops::TransposeOp op,
                                  const std::string &name) {
  std::vector<int64_t> inStrides = stridesOf(shapeOf(op.getOperand()));
  std::vector<int64_t> src;
  for (int64_t p : op.getPermutation())
    src.push_back(inStrides[p]);
  return stridedGather(op, name, src);
}

static KernelSource emitSlice(ops::SliceOp op, const std::string &name) {
  std::vector<int64_t> inStrides = stridesOf(shapeOf(op.getOperand()));
  auto start = op.getStart(), step = op.getStrides();
  std::vector<int64_t> src;
  int64_t base = 0;
  for (size_t d = 0; d < inStrides.size(); ++d) {
    src.push_back(inStrides[d] * step[d]);
    base += start[d] * inStrides[d];
  }
  return stridedGather(op, name, src, base);
}

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

static KernelSource emitPad(ops::PadOp op, const std::string &name) {
  std::vector<int64_t> in = shapeOf(op.getOperand());
  std::vector<int64_t> out = shapeOf(op.getResult());
  std::vector<int64_t> inStrides = stridesOf(in);
  auto low = op.getLow();
  std::string body = "    bool inside = true;\n";
  for (size_t d = out.size(); d-- > 0;)
    body += subst("    { const auto q = r / $D; const auto c = r - q * $D; "
                  "r = q; if (c < $LO || c >= $HI) inside = false; "
                  "else src += (c - $LO) * $S; }\n",
                  {{"D", std::to_string(out[d])},
                   {"LO", std::to_string(low[d])},
                   {"HI", std::to_string(low[d] + in[d])},
                   {"S", std::to_string(inStrides[d])}});
  Elem e = elemOf(op.getResult().getType());
  body += "    out0[o] = inside ? in0[src] : " +
          typedConstant(e, op.getValue().convertToDouble()) + ";\n";
  return gather(op, name, body);
}

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

static KernelSource emitConcat(ops::ConcatOp op, const std::string &name) {
  std::vector<int64_t> out = shapeOf(op.getResult());
  auto d = static_cast<size_t>(op.getDimension());
  int64_t inner = 1;
  for (size_t k = d + 1; k < out.size(); ++k)
    inner *= out[k];
  std::string body = subst(
      "    const auto inner = r % $INNER; r /= $INNER;\n"
      "    const auto c = r % $DIM; const auto outer = r / $DIM;\n",
      {{"INNER", std::to_string(inner)}, {"DIM", std::to_string(out[d])}});
  int64_t offset = 0;
  for (unsigned k = 0; k < op->getNumOperands(); ++k) {
    int64_t size = shapeOf(op->getOperand(k))[d];
    if (size == 0)
      continue;
    body += subst("    ${ELSE}if (c < $END) src = (outer * $SIZE + (c - $OFF)) "
                  "* $INNER + inner, out0[o] = in$K[src];\n",
                  {{"ELSE", offset ? "else " : ""},
                   {"END", std::to_string(offset + size)},
                   {"SIZE", std::to_string(size)},
                   {"OFF", std::to_string(offset)},
                   {"INNER", std::to_string(inner)},
                   {"K", std::to_string(k)}});
    offset += size;
  }
  return gather(op, name, body);
}

//===----------------------------------------------------------------------===//
// step.iota
//===----------------------------------------------------------------------===//

static KernelSource emitIota(ops::IotaOp op, const std::string &name) {
  std::vector<int64_t> out = shapeOf(op.getResult());
  auto d = static_cast<size_t>(op.getDimension());
  int64_t inner = 1;
  for (size_t k = d + 1; k < out.size(); ++k)
    inner *= out[k];
  Elem e = elemOf(op.getResult().getType());
  std::string value = isFloat(e)
                          ? fromD(e, "(double)c")
                          : "(" + std::string(cType(e)) + ")c";
  std::string body = subst("    const auto c = (r / $INNER) % $SIZE;\n"
                           "    (void)src;\n    out0[o] = $VALUE;\n",
                           {{"INNER", std::to_string(inner)},
                            {"SIZE", std::to_string(out[d])},
                            {"VALUE", value}});
  return gather(op, name, body);
}

//===----------------------------------------------------------------------===//
// step.embedding
//===----------------------------------------------------------------------===//

static KernelSource emitEmbedding(ops::EmbeddingOp op,
                                  const std::string &name) {
  std::vector<int64_t> w = shapeOf(op.getWeight());
  int64_t v = w[0], dimD = w[1];
  Elem e = elemOf(op.getWeight().getType());
  // An index outside [0, V) cannot be reported from a kernel: its row is
  // NaN, so the loss shows it (the CPU backend throws).
  std::string nan = fromF(e, "__int_as_float(0x7fc00000)");
  if (dimD % 4 == 0 && elemBytes(e) <= 4 && dimD > 0) {
    KernelSource ks;
    ks.name = name;
    ks.blockX = 256;
    PreludeNeeds needs;
    needs.vec = true;
    std::string params = paramList(op, ks, needs, /*restrict=*/true);
    int64_t n4 = numelOf(op.getResult()) / 4;
    ks.gridX = gridFor(n4, ks.blockX);
    std::string I = idxType(n4 * 4);
    ks.source = prelude(needs) + signature(ks, params) + " {\n" +
                subst(R"(  typedef Vec<$T, 4> V4;
  for ($I o = ($I)blockIdx.x * blockDim.x + threadIdx.x; o < $N4; o += ($I)gridDim.x * blockDim.x) {
    const $I row = o / $D4, j = o - row * $D4;
    const long long idx = (long long)in0[row];
    V4 val;
    if (idx < 0 || idx >= $V) {
      for (int e = 0; e < 4; ++e) val.v[e] = $NAN;
    } else {
      val = reinterpret_cast<const V4 *>(in1)[idx * $D4 + j];
    }
    reinterpret_cast<V4 *>(out0)[o] = val;
  }
}
)",
                      {{"T", cType(e)}, {"I", I},
                       {"N4", std::to_string(n4)},
                       {"D4", std::to_string(dimD / 4)},
                       {"V", std::to_string(v)}, {"NAN", nan}});
    return ks;
  }
  std::string body = subst(
      "    const auto row = r / $D, j = r - row * $D;\n"
      "    const long long idx = (long long)in0[row];\n"
      "    src = idx * $D + j;\n"
      "    out0[o] = (idx < 0 || idx >= $V) ? $NAN : in1[src];\n",
      {{"D", std::to_string(dimD)}, {"V", std::to_string(v)}, {"NAN", nan}});
  return gather(op, name, body);
}

std::optional<KernelSource> emitShapeFamily(mlir::Operation *op,
                                            const std::string &name) {
  if (auto b = mlir::dyn_cast<ops::BroadcastInDimOp>(op))
    return emitBroadcast(b, name);
  if (auto t = mlir::dyn_cast<ops::TransposeOp>(op))
    return emitTranspose(t, name);
  if (auto s = mlir::dyn_cast<ops::SliceOp>(op))
    return emitSlice(s, name);
  if (auto p = mlir::dyn_cast<ops::PadOp>(op))
    return emitPad(p, name);
  if (auto c = mlir::dyn_cast<ops::ConcatOp>(op))
    return emitConcat(c, name);
  if (auto i = mlir::dyn_cast<ops::IotaOp>(op))
    return emitIota(i, name);
  if (auto e = mlir::dyn_cast<ops::EmbeddingOp>(op))
    return emitEmbedding(e, name);
  return std::nullopt;
}

} // namespace step::codegen::detail
