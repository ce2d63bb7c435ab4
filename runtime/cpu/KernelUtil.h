//===- KernelUtil.h - Helpers shared by the CPU kernels ---------*- C++ -*-===//
//
// Internal to runtime/cpu: error formatting, argument checks, strides, and
// element loads/stores that hide the storage type. Loads widen f16/bf16 to
// float exactly; stores round once, to nearest even, into the output dtype.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CPU_KERNELUTIL_H
#define STEP_RUNTIME_CPU_KERNELUTIL_H

#include "runtime/Half.h"
#include "runtime/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace step::rt::cpu::detail {

/// Throws "step.<op>: <msg>".
[[noreturn]] inline void fail(const char *op, const std::string &msg) {
  throw Error(std::string("step.") + op + ": " + msg);
}

/// "f32 [2, 3]" for messages.
inline std::string typeStr(const HostTensor &t) {
  return rt::typeStr(t.dtype(), t.shape());
}

inline std::string listToString(const std::vector<int64_t> &v) {
  return shapeToString(v);
}

inline void requireFloat(const char *op, const HostTensor &t,
                         const char *what) {
  if (!isFloat(t.dtype()))
    fail(op, std::string(what) + " must be f32, f16 or bf16, found " +
                 typeStr(t));
}

inline void requireIndex(const char *op, const HostTensor &t,
                         const char *what) {
  if (!isInteger(t.dtype()))
    fail(op, std::string(what) + " must be i32 or i64, found " + typeStr(t));
}

inline void requireSameType(const char *op, const HostTensor &a,
                            const HostTensor &b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    fail(op, "operands must have the same dtype and shape, found " +
                 typeStr(a) + " and " + typeStr(b));
}

/// Accepts torch-style negative dims (-1 is the last) and returns the dim in
/// [0, rank); anything else throws.
inline int64_t normDim(const char *op, int64_t dim, int64_t rank) {
  if (dim < -rank || dim >= rank)
    fail(op, "dim " + std::to_string(dim) + " out of range for rank " +
                 std::to_string(rank) + " (expected [" +
                 std::to_string(-rank) + ", " + std::to_string(rank) + "))");
  return dim < 0 ? dim + rank : dim;
}

/// Row-major strides in elements.
inline std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/// Product of shape[from, to).
inline int64_t prodDims(const Shape &shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i)
    n *= shape[i];
  return n;
}

inline float loadF(DType t, const void *base, int64_t i) {
  switch (t) {
  case DType::F32:
    return static_cast<const float *>(base)[i];
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(base)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[i]);
  default:
    throw Error("loadF: not a float dtype: " + std::string(dtypeName(t)));
  }
}

inline void storeF(DType t, void *base, int64_t i, float v) {
  switch (t) {
  case DType::F32:
    static_cast<float *>(base)[i] = v;
    return;
  case DType::F16:
    static_cast<uint16_t *>(base)[i] = floatToHalf(v);
    return;
  case DType::BF16:
    static_cast<uint16_t *>(base)[i] = floatToBF16(v);
    return;
  default:
    throw Error("storeF: not a float dtype: " + std::string(dtypeName(t)));
  }
}

/// Rounds a double accumulator once into a float dtype (no double rounding
/// through f32 for f16/bf16).
inline void storeD(DType t, void *base, int64_t i, double v) {
  switch (t) {
  case DType::F32:
    static_cast<float *>(base)[i] = static_cast<float>(v);
    return;
  case DType::F16:
    static_cast<uint16_t *>(base)[i] = doubleToHalf(v);
    return;
  case DType::BF16:
    static_cast<uint16_t *>(base)[i] = doubleToBF16(v);
    return;
  default:
    throw Error("storeD: not a float dtype: " + std::string(dtypeName(t)));
  }
}

/// A float tensor's elements as floats: the f32 buffer itself, or a widened
/// copy for f16/bf16 (so hot loops index a plain array).
class FloatIn {
public:
  explicit FloatIn(const HostTensor &t) {
    if (t.dtype() == DType::F32) {
      p_ = t.data<float>();
      return;
    }
    buf_.resize(static_cast<size_t>(t.numel()));
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      buf_[i] = loadF(t.dtype(), t.raw(), i);
    p_ = buf_.data();
  }
  float operator[](int64_t i) const { return p_[i]; }
  const float *data() const { return p_; }

private:
  std::vector<float> buf_;
  const float *p_ = nullptr;
};

/// Walks the index space `shape` in row-major order as runs along its
/// innermost dim, through two strided views at once (strides in elements,
/// 0 repeats an element): f(a, b, n, sa, sb) for each run of n elements at
/// offsets a and b, sa and sb apart. Dims of size 1 are dropped and a dim
/// merges into the next inner one where both views step through them as
/// through one dim, so the runs are as long as the layouts allow and the
/// elements come in the same order. Nothing for an empty space; a scalar
/// one is one run of one element.
template <typename F>
void forEachRun(const Shape &shape, const std::vector<int64_t> &stridesA,
                const std::vector<int64_t> &stridesB, F &&f) {
  if (numElements(shape) == 0)
    return;
  Shape m;
  std::vector<int64_t> ma, mb;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!m.empty() && ma.back() == stridesA[d] * shape[d] &&
        mb.back() == stridesB[d] * shape[d]) {
      m.back() *= shape[d];
      ma.back() = stridesA[d];
      mb.back() = stridesB[d];
      continue;
    }
    m.push_back(shape[d]);
    ma.push_back(stridesA[d]);
    mb.push_back(stridesB[d]);
  }
  if (m.empty()) {
    f(int64_t(0), int64_t(0), int64_t(1), int64_t(0), int64_t(0));
    return;
  }
  size_t rank = m.size();
  int64_t inner = m[rank - 1], total = numElements(m);
  std::vector<int64_t> idx(rank, 0);
  int64_t a = 0, b = 0;
  for (int64_t done = 0; done < total; done += inner) {
    f(a, b, inner, ma[rank - 1], mb[rank - 1]);
    for (size_t d = rank - 1; d-- > 0;) { // the odometer of the outer dims
      ++idx[d];
      a += ma[d];
      b += mb[d];
      if (idx[d] < m[d])
        break;
      a -= ma[d] * m[d];
      b -= mb[d] * m[d];
      idx[d] = 0;
    }
  }
}

/// Runs body(begin, end) over [0, n) in contiguous ranges, one per thread
/// (the calling thread takes the first): at most `maxThreads` threads, each
/// with at least `minPerThread` items, so small jobs stay on the caller.
/// Which thread runs a range never changes what the range computes; a body
/// whose items are independent gives the same bits for every thread count.
/// An exception in any range is rethrown here once every thread is done
/// (the lowest range's first).
template <typename Body>
void forRanges(int64_t n, int64_t minPerThread, int maxThreads,
               const Body &body) {
  int64_t threads = std::min<int64_t>(
      maxThreads, std::max<int64_t>(1, n / std::max<int64_t>(1, minPerThread)));
  if (threads <= 1) {
    body(int64_t(0), n);
    return;
  }
  int64_t per = (n + threads - 1) / threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto run = [&body, &errors, per, n](int64_t k) {
    try {
      body(k * per, std::min(n, (k + 1) * per));
    } catch (...) {
      errors[static_cast<size_t>(k)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t k = 1; k < threads && k * per < n; ++k)
    pool.emplace_back(run, k);
  run(0);
  for (std::thread &t : pool)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
}

/// A row-major product C[m x n] = op(A) * op(B) (+ C when accumulate), op
/// transposing when asked; C's rows are n apart. OpenBLAS sgemm / dgemm, or
/// a plain loop without it (runtime/cpu/Linalg.cpp). Dims must fit an int.
struct GemmDims {
  int64_t m, n, k;
  bool transA = false, transB = false;
  bool accumulate = false;
};
void gemm(const GemmDims &g, const float *a, const float *b, float *c);
void gemm(const GemmDims &g, const double *a, const double *b, double *c);

/// Integer element i of an i32/i64 tensor, widened.
inline int64_t loadIndex(const HostTensor &t, int64_t i) {
  return t.dtype() == DType::I32 ? t.data<int32_t>()[i]
                                 : t.data<int64_t>()[i];
}

/// Checks the operands of cross_entropy and its gradient (float logits
/// [N, C], integer targets [N], each target in [0, C) or ignoreIndex) and
/// returns the number of rows that are not ignored.
inline int64_t checkCrossEntropyTargets(const char *op,
                                        const HostTensor &logits,
                                        const HostTensor &targets,
                                        int64_t ignoreIndex) {
  requireFloat(op, logits, "logits");
  requireIndex(op, targets, "targets");
  if (logits.rank() != 2 || targets.rank() != 1 ||
      targets.shape()[0] != logits.shape()[0])
    fail(op, "expected logits [N, C] and targets [N], found logits " +
                 typeStr(logits) + " and targets " + typeStr(targets));
  int64_t n = logits.shape()[0], c = logits.shape()[1], counted = 0;
  for (int64_t row = 0; row < n; ++row) {
    int64_t t = loadIndex(targets, row);
    if (t == ignoreIndex)
      continue;
    if (t < 0 || t >= c)
      fail(op, "target " + std::to_string(t) + " at position " +
                   std::to_string(row) + " is out of range [0, " +
                   std::to_string(c) + ") and is not ignore_index (" +
                   std::to_string(ignoreIndex) + ")");
    ++counted;
  }
  return counted;
}

/// Calls f(int32_t{}) or f(int64_t{}) for an integer dtype.
template <typename F> auto visitInt(DType t, F &&f) {
  if (t == DType::I32)
    return f(int32_t{});
  return f(int64_t{});
}

/// Float -> integer as step.cast defines it: truncation toward zero,
/// saturating out of range, NaN -> 0.
template <typename I> inline I saturatingTrunc(double v) {
  if (std::isnan(v))
    return 0;
  // 2^(bits-1) is exact in double; compare against it rather than max(),
  // which rounds up for i64.
  const double lim = std::ldexp(1.0, std::numeric_limits<I>::digits);
  if (v >= lim)
    return std::numeric_limits<I>::max();
  if (v < -lim)
    return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

} // namespace step::rt::cpu::detail

#endif // STEP_RUNTIME_CPU_KERNELUTIL_H
