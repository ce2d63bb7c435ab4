//===- ShapeOps.cpp - Tracing shape ops and reductions --------------------===//
//
// reshape, transpose, slice, concat, pad and the reductions. PyTorch's
// conveniences (negative dims, a -1 in reshape, Python slice bounds, an
// empty dims list meaning "all dims") are resolved here, so the emitted step
// ops only ever see explicit, non-negative attributes. Mistakes are reported
// with the user's shapes before any op is created.
//
//===----------------------------------------------------------------------===//

#include "compiler/trace/GraphState.h"
#include "compiler/trace/Ops.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>

namespace step::trace {

using namespace detail;
namespace ops = mlir::step;
using mlir::ShapedType;

namespace {
std::string listStr(llvm::ArrayRef<int64_t> values) {
  return rt::shapeToString(std::vector<int64_t>(values.begin(), values.end()));
}
} // namespace

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

Tensor reshape(const Tensor &x, const Shape &shape, SourceLoc loc) {
  GraphState &g = graphOf("reshape", {x}, loc);
  auto in = typeOf(x.value());
  int64_t inferAt = -1;
  int64_t known = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    // A symbolic size (dyn()) is what the element count leaves, as -1.
    if (d == -1 || isSymbolic(d)) {
      if (inferAt >= 0)
        shapeError("reshape",
                   "only one dim may be -1, got " + listStr(shape), loc);
      inferAt = static_cast<int64_t>(i);
    } else if (d < 0) {
      shapeError("reshape", "invalid target shape " + listStr(shape), loc);
    } else {
      known *= d;
    }
  }
  llvm::SmallVector<int64_t> out(shape.begin(), shape.end());
  if (in.hasStaticShape()) {
    int64_t total = in.getNumElements();
    std::string what = "cannot reshape " + shapeOf(x) + " (" +
                       std::to_string(total) + " elements) to " +
                       listStr(shape);
    if (inferAt >= 0) {
      if (known == 0 || total % known != 0)
        shapeError("reshape", what, loc);
      out[inferAt] = total / known;
    } else if (known != total) {
      shapeError("reshape",
                 what + " (" + std::to_string(known) + " elements)", loc);
    }
  } else if (inferAt >= 0) {
    // The size follows from the element count only at run time.
    out[inferAt] = ShapedType::kDynamic;
  }
  return wrap(g, reshapeTo(g, x.value(), out, loc, "reshape"));
}

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm,
                 SourceLoc loc) {
  GraphState &g = graphOf("transpose", {x}, loc);
  int64_t rank = x.rank();
  auto dims = dimsOf(x.value());
  llvm::SmallVector<int64_t> p;
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t d : perm) {
    if (!ok || d < -rank || d >= rank)
      break;
    int64_t n = d < 0 ? d + rank : d;
    ok = !seen[n];
    seen[n] = true;
    p.push_back(n);
  }
  if (!ok || static_cast<int64_t>(p.size()) != rank)
    shapeError("transpose",
               "perm " + listStr(perm) + " is not a permutation of the " +
                   std::to_string(rank) + " dims of " + shapeOf(x),
               loc);
  bool identity = true;
  for (int64_t i = 0; i < rank; ++i)
    identity = identity && p[i] == i;
  if (identity)
    return x;
  llvm::SmallVector<int64_t> shape;
  for (int64_t n : p)
    shape.push_back(dims[n]);
  return wrap(g, g.create<ops::TransposeOp>(
                     loc, "transpose", tensorType(g, shape, x.dtype()),
                     x.value(), p));
}

Tensor transpose(const Tensor &x, int64_t d0, int64_t d1, SourceLoc loc) {
  graphOf("transpose", {x}, loc);
  int64_t rank = x.rank();
  auto dims = dimsOf(x.value());
  int64_t a = normalizeDim("transpose", d0, rank, dims, loc);
  int64_t b = normalizeDim("transpose", d1, rank, dims, loc);
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return transpose(x, perm, loc);
}

Tensor t(const Tensor &x, SourceLoc loc) {
  graphOf("t", {x}, loc);
  // As torch.t: 0-D and 1-D tensors are returned as they are.
  if (x.rank() < 2)
    return x;
  if (x.rank() > 2)
    shapeError("t", "expects a tensor of rank <= 2, got " + shapeOf(x), loc);
  return transpose(x, {1, 0}, loc);
}

//===----------------------------------------------------------------------===//
// step.slice, step.concat, step.pad
//===----------------------------------------------------------------------===//

Tensor slice(const Tensor &x, const std::vector<int64_t> &start,
             const std::vector<int64_t> &limit,
             const std::vector<int64_t> &strides, SourceLoc loc) {
  GraphState &g = graphOf("slice", {x}, loc);
  return wrap(g, g.create<ops::SliceOp>(loc, "slice", x.value().getType(),
                                        x.value(), start, limit, strides));
}

Tensor slice(const Tensor &x, int64_t dim, int64_t start, int64_t end,
             int64_t step, SourceLoc loc) {
  graphOf("slice", {x}, loc);
  auto dims = dimsOf(x.value());
  int64_t d = normalizeDim("slice", dim, x.rank(), dims, loc);
  if (step < 1)
    shapeError("slice", "step must be >= 1, got " + std::to_string(step),
               loc);
  // step.slice spells out every limit, so every dim must be static.
  for (auto [i, size] : llvm::enumerate(dims))
    if (ShapedType::isDynamic(size))
      shapeError("slice",
                 "dim " + std::to_string(i) + " of " + shapeOf(x) +
                     " is dynamic; step.slice needs static dims",
                 loc);
  int64_t size = dims[d];
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  int64_t lo = clampIndex(start), hi = std::max(lo, clampIndex(end));
  std::vector<int64_t> starts(x.rank(), 0), strides(x.rank(), 1);
  std::vector<int64_t> limits(dims.begin(), dims.end());
  starts[d] = lo;
  limits[d] = hi;
  strides[d] = step;
  return slice(x, starts, limits, strides, loc);
}

Tensor concat(const std::vector<Tensor> &xs, int64_t dim, SourceLoc loc) {
  if (xs.empty())
    shapeError("concat", "needs at least one tensor", loc);
  GraphState &g = graphOf("concat", {xs[0]}, loc);
  std::vector<Operand> operands;
  for (const Tensor &x : xs) {
    if (&graphOf("concat", {x}, loc) != &g)
      throw std::invalid_argument("concat: the tensors belong to different "
                                  "graphs" + where(loc));
    operands.emplace_back(x);
  }
  int64_t rank = xs[0].rank();
  auto first = dimsOf(xs[0].value());
  int64_t d = normalizeDim("concat", dim, rank, first, loc);
  for (const Tensor &x : xs) {
    auto dims = dimsOf(x.value());
    if (x.rank() != rank)
      shapeError("concat",
                 "tensors must have one rank, got " + shapeStr(first) +
                     " and " + shapeStr(dims),
                 loc);
    for (int64_t i = 0; i < rank; ++i)
      if (i != d && !ShapedType::isDynamic(dims[i]) &&
          !ShapedType::isDynamic(first[i]) && dims[i] != first[i])
        shapeError("concat",
                   "shapes " + shapeStr(first) + " and " + shapeStr(dims) +
                       " differ in dim " + std::to_string(i) +
                       " (concatenating along dim " + std::to_string(d) + ")",
                   loc);
  }
  if (xs.size() == 1)
    return xs[0];
  DType dtype = resultType(operands);
  llvm::SmallVector<mlir::Value> values;
  for (const Tensor &x : xs)
    values.push_back(castTo(g, x.value(), dtype, loc, "concat"));
  return wrap(g, g.create<ops::ConcatOp>(loc, "concat", values[0].getType(),
                                         values, static_cast<uint64_t>(d)));
}

Tensor pad(const Tensor &x, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, double value, SourceLoc loc) {
  GraphState &g = graphOf("pad", {x}, loc);
  if (static_cast<int64_t>(low.size()) != x.rank() ||
      static_cast<int64_t>(high.size()) != x.rank())
    shapeError("pad",
               "low " + listStr(low) + " and high " + listStr(high) +
                   " need one entry per dim of " + shapeOf(x),
               loc);
  for (size_t i = 0; i < low.size(); ++i)
    if (low[i] < 0 || high[i] < 0)
      shapeError("pad",
                 "padding must be >= 0, got low " + listStr(low) +
                     " and high " + listStr(high) + " for " + shapeOf(x),
                 loc);
  return wrap(g, g.create<ops::PadOp>(loc, "pad", x.value().getType(),
                                      x.value(), low, high,
                                      llvm::APFloat(value)));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {
enum class ReduceKind { Sum, Mean, Max };

template <typename OpTy>
Tensor reduce(llvm::StringRef name, ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &dims, bool keepdim,
              const SourceLoc &loc) {
  GraphState &g = graphOf(name, {x}, loc);
  mlir::Value v = x.value();
  DType dtype = x.dtype();
  if (kind == ReduceKind::Sum && !isFloat(dtype))
    v = castTo(g, v, DType::I64, loc, name); // torch.sum of ints is int64
  if (kind == ReduceKind::Mean && !isFloat(dtype))
    dtypeError(name,
               std::string("needs a float tensor, got ") +
                   rt::dtypeName(dtype) + " (as torch.mean; cast it first)",
               loc);
  if (kind == ReduceKind::Max && dtype == DType::I1)
    dtypeError(name, "bool tensors are not supported; cast them first", loc);
  int64_t rank = x.rank();
  auto shape = dimsOf(x.value());
  llvm::SmallVector<int64_t> axes;
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    int64_t n = normalizeDim(name, d, rank, shape, loc);
    if (seen[n])
      shapeError(name,
                 "dim " + std::to_string(d) + " is repeated in " +
                     listStr(dims) + " for " + shapeOf(x),
                 loc);
    seen[n] = true;
    axes.push_back(n);
  }
  if (dims.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  llvm::sort(axes);
  return wrap(g, g.create<OpTy>(loc, name, v.getType(), v, axes, keepdim));
}
} // namespace

#define STEP_TRACE_DEFINE_REDUCE(NAME, OP, KIND)                               \
  Tensor NAME(const Tensor &x, SourceLoc loc) {                               \
    return reduce<ops::OP>(#NAME, KIND, x, {}, false, loc);                    \
  }                                                                            \
  Tensor NAME(const Tensor &x, const Dims &dims, bool keepdim,               \
              SourceLoc loc) {                                                 \
    return reduce<ops::OP>(#NAME, KIND, x, dims.dims, keepdim, loc);           \
  }

STEP_TRACE_DEFINE_REDUCE(sum, ReduceSumOp, ReduceKind::Sum)
STEP_TRACE_DEFINE_REDUCE(mean, ReduceMeanOp, ReduceKind::Mean)
STEP_TRACE_DEFINE_REDUCE(amax, ReduceMaxOp, ReduceKind::Max)
#undef STEP_TRACE_DEFINE_REDUCE

} // namespace step::trace
