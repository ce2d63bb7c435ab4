//===- Shape.cpp - step data-movement ops ---------------------------------===//
//
// broadcast_in_dim, reshape, transpose, slice, concat, pad and iota. All of
// them move whole elements without touching their values, so they work on
// every dtype through one strided byte copy.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <algorithm>

namespace step::rt::cpu {

using namespace detail;

/// Copies the elements of an index space `shape`, reading element idx at
/// src + sum(idx[d] * srcStrides[d]) and writing it at dst + sum(idx[d] *
/// dstStrides[d]) (strides in elements; a stride may be 0 to repeat).
/// dst[0..n) = the element of `es` bytes at `value`, each a copy of its bits.
template <typename T>
static void fillAs(uint8_t *dst, int64_t n, const uint8_t *value) {
  T v;
  std::memcpy(&v, value, sizeof v);
  T *out = reinterpret_cast<T *>(dst);
  std::fill(out, out + n, v);
}
static void fillWith(uint8_t *dst, int64_t n, const uint8_t *value,
                     size_t es) {
  switch (es) {
  case 1: fillAs<uint8_t>(dst, n, value); return;
  case 2: fillAs<uint16_t>(dst, n, value); return;
  case 4: fillAs<uint32_t>(dst, n, value); return;
  case 8: fillAs<uint64_t>(dst, n, value); return;
  default:
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + static_cast<size_t>(i) * es, value, es);
  }
}

/// The innermost run of a strided copy: n elements of type T, src and dst
/// `ss` and `ds` elements apart (ss = 0 repeats one element).
template <typename T>
static void copyRun(const uint8_t *src, int64_t ss, uint8_t *dst, int64_t ds,
                    int64_t n) {
  if (ss == 1 && ds == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  T *out = reinterpret_cast<T *>(dst);
  if (ss == 0) { // a broadcast: one value n times
    T v;
    std::memcpy(&v, src, sizeof v);
    for (int64_t j = 0; j < n; ++j)
      out[j * ds] = v;
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    T v;
    std::memcpy(&v, src + j * ss * static_cast<int64_t>(sizeof(T)), sizeof v);
    out[j * ds] = v;
  }
}

template <typename T>
static void stridedCopyAs(const Shape &shape, const uint8_t *src,
                          const std::vector<int64_t> &srcStrides, uint8_t *dst,
                          const std::vector<int64_t> &dstStrides) {
  const int64_t es = sizeof(T);
  forEachRun(shape, srcStrides, dstStrides,
             [&](int64_t a, int64_t b, int64_t n, int64_t sa, int64_t sb) {
               copyRun<T>(src + a * es, sa, dst + b * es, sb, n);
             });
}

/// Copies through forEachRun (KernelUtil.h): merged dims, so each
/// innermost run (a transpose's rows, a broadcast's repeated rows) is one
/// memcpy, one fill or one typed loop.
static void stridedCopy(size_t es, const Shape &shape, const uint8_t *src,
                        const std::vector<int64_t> &srcStrides, uint8_t *dst,
                        const std::vector<int64_t> &dstStrides) {
  switch (es) {
  case 1:
    return stridedCopyAs<uint8_t>(shape, src, srcStrides, dst, dstStrides);
  case 2:
    return stridedCopyAs<uint16_t>(shape, src, srcStrides, dst, dstStrides);
  case 4:
    return stridedCopyAs<uint32_t>(shape, src, srcStrides, dst, dstStrides);
  case 8:
    return stridedCopyAs<uint64_t>(shape, src, srcStrides, dst, dstStrides);
  default:
    throw Error("stridedCopy: element size " + std::to_string(es) +
                " is not 1, 2, 4 or 8 bytes");
  }
}

static const uint8_t *bytesOf(const HostTensor &t) {
  return static_cast<const uint8_t *>(t.raw());
}
static uint8_t *bytesOf(HostTensor &t) {
  return static_cast<uint8_t *>(t.raw());
}

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

HostTensor broadcastInDim(const HostTensor &x, const Shape &outShape,
                          const std::vector<int64_t> &dims) {
  const char *op = "broadcast_in_dim";
  int64_t outRank = static_cast<int64_t>(outShape.size());
  if (static_cast<int64_t>(dims.size()) != x.rank())
    fail(op, "expected one entry of dims per operand dim (" +
                 std::to_string(x.rank()) + "), found dims " +
                 listToString(dims) + " for operand " + typeStr(x));
  for (int64_t d : outShape)
    if (d < 0)
      fail(op, "negative result dim in " + shapeToString(outShape));
  std::vector<int64_t> xs = stridesOf(x.shape());
  std::vector<int64_t> srcStrides(outShape.size(), 0);
  std::vector<bool> used(outShape.size(), false);
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = dims[k];
    if (d < 0 || d >= outRank || used[d])
      fail(op, "dims " + listToString(dims) +
                   " must be unique and in [0, " + std::to_string(outRank) +
                   ") for result shape " + shapeToString(outShape));
    used[d] = true;
    int64_t in = x.shape()[k];
    if (in != 1 && in != outShape[d])
      fail(op, "operand dim " + std::to_string(k) + " (size " +
                   std::to_string(in) + ") must be 1 or equal result dim " +
                   std::to_string(d) + " (size " +
                   std::to_string(outShape[d]) + "); operand " + typeStr(x) +
                   ", result shape " + shapeToString(outShape));
    // A size-1 dim keeps stride 0 so its single element repeats.
    if (in != 1)
      srcStrides[d] = xs[k];
  }
  HostTensor y(x.dtype(), outShape);
  if (x.numel() == 1) {
    // One element everywhere (a splat, step-splat-broadcast): a fill.
    fillWith(bytesOf(y), y.numel(), bytesOf(x), dtypeSize(x.dtype()));
    return y;
  }
  stridedCopy(dtypeSize(x.dtype()), outShape, bytesOf(x), srcStrides,
              bytesOf(y), stridesOf(outShape));
  return y;
}

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

HostTensor reshape(const HostTensor &x, const Shape &shape) {
  const char *op = "reshape";
  Shape out = shape;
  int64_t inferAt = -1, known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (inferAt >= 0)
        fail(op, "at most one dim may be -1, found " + shapeToString(shape));
      inferAt = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      fail(op, "invalid dim " + std::to_string(out[i]) + " in shape " +
                   shapeToString(shape));
    } else {
      known *= out[i];
    }
  }
  if (inferAt >= 0) {
    if (known == 0)
      fail(op, "cannot infer the -1 in " + shapeToString(shape) +
                   " for operand " + typeStr(x) +
                   ": the other dims multiply to 0");
    if (x.numel() % known != 0)
      fail(op, "cannot reshape " + typeStr(x) + " (" +
                   std::to_string(x.numel()) + " elements) to " +
                   shapeToString(shape));
    out[inferAt] = x.numel() / known;
  }
  if (numElements(out) != x.numel())
    fail(op, "cannot reshape " + typeStr(x) + " (" +
                 std::to_string(x.numel()) + " elements) to " +
                 shapeToString(shape) + " (" +
                 std::to_string(numElements(out)) + " elements)");
  HostTensor y(x.dtype(), out);
  if (x.byteSize())
    std::memcpy(y.raw(), x.raw(), x.byteSize());
  return y;
}

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

HostTensor transpose(const HostTensor &x, const std::vector<int64_t> &perm) {
  int64_t rank = x.rank();
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  std::vector<bool> seen(perm.size(), false);
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok)
      seen[perm[i]] = true;
  }
  if (!ok)
    fail("transpose", "permutation " + listToString(perm) +
                          " is not a permutation of [0, " +
                          std::to_string(rank) + ") for operand " +
                          typeStr(x));
  std::vector<int64_t> xs = stridesOf(x.shape());
  Shape out(rank);
  std::vector<int64_t> srcStrides(rank);
  for (int64_t i = 0; i < rank; ++i) {
    out[i] = x.shape()[perm[i]];
    srcStrides[i] = xs[perm[i]];
  }
  HostTensor y(x.dtype(), out);
  stridedCopy(dtypeSize(x.dtype()), out, bytesOf(x), srcStrides, bytesOf(y),
              stridesOf(out));
  return y;
}

//===----------------------------------------------------------------------===//
// step.slice
//===----------------------------------------------------------------------===//

HostTensor slice(const HostTensor &x, const std::vector<int64_t> &start,
                 const std::vector<int64_t> &limit,
                 const std::vector<int64_t> &stride) {
  const char *op = "slice";
  size_t rank = x.shape().size();
  if (start.size() != rank || limit.size() != rank || stride.size() != rank)
    fail(op, "start " + listToString(start) + ", limit " +
                 listToString(limit) + " and stride " + listToString(stride) +
                 " must each have one entry per dim of " + typeStr(x));
  std::vector<int64_t> xs = stridesOf(x.shape());
  Shape out(rank);
  std::vector<int64_t> srcStrides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > x.shape()[d] ||
        stride[d] < 1)
      fail(op, "dim " + std::to_string(d) + ": expected 0 <= start <= limit"
               " <= " + std::to_string(x.shape()[d]) + " and stride >= 1, "
               "found start " + std::to_string(start[d]) + ", limit " +
               std::to_string(limit[d]) + ", stride " +
               std::to_string(stride[d]) + " for operand " + typeStr(x));
    out[d] = (limit[d] - start[d] + stride[d] - 1) / stride[d];
    srcStrides[d] = xs[d] * stride[d];
    base += start[d] * xs[d];
  }
  HostTensor y(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  if (y.numel())
    stridedCopy(es, out, bytesOf(x) + base * es, srcStrides, bytesOf(y),
                stridesOf(out));
  return y;
}

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

HostTensor concat(const std::vector<HostTensor> &xs, int64_t dim) {
  const char *op = "concat";
  if (xs.empty())
    fail(op, "expected at least one operand, found none");
  const HostTensor &first = xs[0];
  if (first.rank() == 0)
    fail(op, "operands must have rank >= 1, found " + typeStr(first));
  int64_t d = normDim(op, dim, first.rank());
  Shape out = first.shape();
  out[d] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const HostTensor &x = xs[i];
    bool ok = x.dtype() == first.dtype() && x.rank() == first.rank();
    for (int64_t k = 0; ok && k < x.rank(); ++k)
      ok = k == d || x.shape()[k] == first.shape()[k];
    if (!ok)
      fail(op, "operand " + std::to_string(i) + " is " + typeStr(x) +
                   " but operand 0 is " + typeStr(first) +
                   "; expected the same dtype and rank, and the same sizes "
                   "except along dim " + std::to_string(d));
    out[d] += x.shape()[d];
  }
  HostTensor y(first.dtype(), out);
  size_t es = dtypeSize(first.dtype());
  int64_t outer = prodDims(out, 0, d);
  int64_t innerOut = prodDims(out, d, out.size()) * es;
  uint8_t *dst = bytesOf(y);
  int64_t offset = 0; // byte offset of the current operand within one row
  for (const HostTensor &x : xs) {
    int64_t chunk = prodDims(x.shape(), d, x.shape().size()) * es;
    const uint8_t *src = bytesOf(x);
    if (chunk)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + o * innerOut + offset, src + o * chunk, chunk);
    offset += chunk;
  }
  return y;
}

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

HostTensor pad(const HostTensor &x, const std::vector<int64_t> &low,
               const std::vector<int64_t> &high, double value) {
  const char *op = "pad";
  size_t rank = x.shape().size();
  if (low.size() != rank || high.size() != rank)
    fail(op, "low " + listToString(low) + " and high " + listToString(high) +
                 " must each have one entry per dim of " + typeStr(x));
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (low[d] < 0 || high[d] < 0)
      fail(op, "padding must be >= 0, found low " + listToString(low) +
                   " and high " + listToString(high));
    out[d] = x.shape()[d] + low[d] + high[d];
  }
  HostTensor y(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  HostTensor fill(x.dtype(), {});
  fill.setFromDouble(0, value);
  uint8_t *dst = bytesOf(y);
  fillWith(dst, y.numel(), static_cast<const uint8_t *>(fill.raw()), es);
  std::vector<int64_t> ys = stridesOf(out);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d)
    base += low[d] * ys[d];
  if (x.numel())
    stridedCopy(es, x.shape(), bytesOf(x), stridesOf(x.shape()),
                dst + base * es, ys);
  return y;
}

//===----------------------------------------------------------------------===//
// step.iota
//===----------------------------------------------------------------------===//

HostTensor iota(DType dtype, const Shape &shape, int64_t dim) {
  const char *op = "iota";
  for (int64_t s : shape)
    if (s < 0)
      fail(op, "negative dim in shape " + shapeToString(shape));
  int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0)
    fail(op, "result must have rank >= 1, found shape []");
  int64_t d = normDim(op, dim, rank);
  HostTensor y(dtype, shape);
  int64_t inner = prodDims(shape, d + 1, shape.size());
  int64_t size = shape[d];
  for (int64_t i = 0, n = y.numel(); i < n; ++i)
    y.setFromDouble(i, static_cast<double>((i / inner) % size));
  return y;
}

} // namespace step::rt::cpu
