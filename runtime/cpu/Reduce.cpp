//===- Reduce.cpp - step.reduce_sum / reduce_max / reduce_mean ------------===//
//
// One pass over the input in row-major order, accumulating into one slot per
// output element; the order of additions is therefore fixed and results are
// deterministic. Float sums accumulate in double and are rounded once.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace step::rt::cpu {

using namespace detail;

static const char *reduceName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum: return "reduce_sum";
  case ReduceOp::Max: return "reduce_max";
  case ReduceOp::Mean: return "reduce_mean";
  }
  return "reduce";
}

namespace {
/// Maps each input element, visited in row-major order, to its output slot.
class OutputIndexer {
public:
  OutputIndexer(const Shape &in, const std::vector<bool> &reduced)
      : shape_(in), idx_(in.size(), 0), step_(in.size(), 0) {
    // Output strides over the kept dims; reduced dims contribute 0.
    int64_t acc = 1;
    for (size_t d = in.size(); d-- > 0;) {
      if (reduced[d])
        continue;
      step_[d] = acc;
      acc *= in[d];
    }
  }
  int64_t current() const { return out_; }
  void advance() {
    for (size_t d = shape_.size(); d-- > 0;) {
      ++idx_[d];
      out_ += step_[d];
      if (idx_[d] < shape_[d])
        return;
      out_ -= step_[d] * shape_[d];
      idx_[d] = 0;
    }
  }

private:
  const Shape &shape_;
  std::vector<int64_t> idx_, step_;
  int64_t out_ = 0;
};
} // namespace

template <typename I>
static void reduceInt(ReduceOp op, const HostTensor &x,
                      const std::vector<bool> &reduced, HostTensor &y) {
  using U = std::make_unsigned_t<I>;
  const I *src = x.data<I>();
  I *dst = y.data<I>();
  int64_t m = y.numel();
  // Sums wrap like the elementwise add (two's complement, no UB).
  std::vector<U> acc(m, op == ReduceOp::Sum
                            ? U(0)
                            : static_cast<U>(std::numeric_limits<I>::min()));
  OutputIndexer oi(x.shape(), reduced);
  for (int64_t i = 0, n = x.numel(); i < n; ++i, oi.advance()) {
    U &a = acc[oi.current()];
    if (op == ReduceOp::Sum)
      a += static_cast<U>(src[i]);
    else if (src[i] > static_cast<I>(a))
      a = static_cast<U>(src[i]);
  }
  for (int64_t j = 0; j < m; ++j)
    dst[j] = static_cast<I>(acc[j]);
}

/// Max over i1 is any().
static void reduceBool(const HostTensor &x, const std::vector<bool> &reduced,
                       HostTensor &y) {
  const uint8_t *src = x.data<uint8_t>();
  uint8_t *dst = y.data<uint8_t>();
  OutputIndexer oi(x.shape(), reduced);
  for (int64_t i = 0, n = x.numel(); i < n; ++i, oi.advance())
    dst[oi.current()] |= src[i];
}

static void reduceFloat(ReduceOp op, const HostTensor &x,
                        const std::vector<bool> &reduced, int64_t count,
                        HostTensor &y) {
  FloatIn src(x);
  int64_t m = y.numel();
  std::vector<double> acc(m, op == ReduceOp::Max ? -INFINITY : 0.0);
  OutputIndexer oi(x.shape(), reduced);
  for (int64_t i = 0, n = x.numel(); i < n; ++i, oi.advance()) {
    double &a = acc[oi.current()];
    double v = src[i];
    if (op != ReduceOp::Max)
      a += v;
    else if (!std::isnan(a) && (std::isnan(v) || v > a))
      a = v; // once NaN, stays NaN (torch.amax propagates it)
  }
  for (int64_t j = 0; j < m; ++j) {
    // Mean of an empty set: 0/0 = NaN, as torch.mean.
    double v = op == ReduceOp::Mean ? acc[j] / static_cast<double>(count)
                                    : acc[j];
    storeD(y.dtype(), y.raw(), j, v);
  }
}

HostTensor reduce(ReduceOp op, const HostTensor &x,
                  const std::vector<int64_t> &dims, bool keepDim) {
  const char *name = reduceName(op);
  int64_t rank = x.rank();
  std::vector<bool> reduced(rank, false);
  for (int64_t dim : dims) {
    int64_t d = normDim(name, dim, rank);
    if (reduced[d])
      fail(name, "dims " + listToString(dims) + " repeat dim " +
                     std::to_string(d) + " of operand " + typeStr(x));
    reduced[d] = true;
  }
  DType t = x.dtype();
  if (op == ReduceOp::Mean && !isFloat(t))
    fail(name, "operand must be f32, f16 or bf16, found " + typeStr(x));
  if (op == ReduceOp::Sum && t == DType::I1)
    fail(name, "operand must be f32, f16, bf16, i32 or i64, found " +
                   typeStr(x));
  Shape out;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d])
      count *= x.shape()[d];
    if (!reduced[d])
      out.push_back(x.shape()[d]);
    else if (keepDim)
      out.push_back(1);
  }
  if (op == ReduceOp::Max && count == 0)
    fail(name, "cannot take the max over zero elements: reduced dims " +
                   listToString(dims) + " of operand " + typeStr(x) +
                   " include a size-0 dim");
  HostTensor y(t, out);
  if (isFloat(t))
    reduceFloat(op, x, reduced, count, y);
  else if (t == DType::I1)
    reduceBool(x, reduced, y);
  else
    visitInt(t, [&](auto tag) {
      reduceInt<decltype(tag)>(op, x, reduced, y);
    });
  return y;
}

} // namespace step::rt::cpu
