//===- Reduce.cpp - step.reduce_sum / reduce_max / reduce_mean ------------===//
//
// One pass over the input in row-major order, accumulating into one slot per
// output element; the order of additions is therefore fixed and results are
// deterministic. The walk goes by runs of the innermost (merged) dim, so a
// row sum is a loop over the row and a column sum a loop over the columns.
// Float sums accumulate in double and are rounded once.
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

/// Visits the input in row-major order as runs along its innermost (merged)
/// dim (forEachRun, KernelUtil.h): f(in, out, n, reducedRun) for elements
/// in..in+n, which go to output slot `out` (reducedRun: the innermost dim
/// is reduced) or to out..out+n (a kept innermost dim has output stride 1).
/// Every output slot sees its elements in increasing input order, as an
/// element-by-element walk does.
template <typename F>
static void forEachReducedRun(const Shape &in, const std::vector<bool> &reduced,
                              F &&f) {
  std::vector<int64_t> outStrides(in.size(), 0); // 0 on reduced dims
  int64_t acc = 1;
  for (size_t d = in.size(); d-- > 0;)
    if (!reduced[d]) {
      outStrides[d] = acc;
      acc *= in[d];
    }
  forEachRun(in, stridesOf(in), outStrides,
             [&](int64_t i, int64_t o, int64_t n, int64_t, int64_t so) {
               f(i, o, n, so == 0);
             });
}

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
  forEachReducedRun(x.shape(), reduced,
                    [&](int64_t in, int64_t out, int64_t n, bool reducedRun) {
                      for (int64_t j = 0; j < n; ++j) {
                        U &a = acc[reducedRun ? out : out + j];
                        I v = src[in + j];
                        if (op == ReduceOp::Sum)
                          a += static_cast<U>(v);
                        else if (v > static_cast<I>(a))
                          a = static_cast<U>(v);
                      }
                    });
  for (int64_t j = 0; j < m; ++j)
    dst[j] = static_cast<I>(acc[j]);
}

/// Max over i1 is any().
static void reduceBool(const HostTensor &x, const std::vector<bool> &reduced,
                       HostTensor &y) {
  const uint8_t *src = x.data<uint8_t>();
  uint8_t *dst = y.data<uint8_t>();
  forEachReducedRun(x.shape(), reduced,
                    [&](int64_t in, int64_t out, int64_t n, bool reducedRun) {
                      for (int64_t j = 0; j < n; ++j)
                        dst[reducedRun ? out : out + j] |= src[in + j];
                    });
}

static void reduceFloat(ReduceOp op, const HostTensor &x,
                        const std::vector<bool> &reduced, int64_t count,
                        HostTensor &y) {
  FloatIn src(x);
  int64_t m = y.numel();
  std::vector<double> acc(m, op == ReduceOp::Max ? -INFINITY : 0.0);
  const float *p = src.data();
  if (op != ReduceOp::Max)
    forEachReducedRun(
        x.shape(), reduced,
        [&](int64_t in, int64_t out, int64_t n, bool reducedRun) {
          if (reducedRun) { // one slot: a running sum in a register
            double a = acc[out];
            for (int64_t j = 0; j < n; ++j)
              a += static_cast<double>(p[in + j]);
            acc[out] = a;
          } else {
            for (int64_t j = 0; j < n; ++j)
              acc[out + j] += static_cast<double>(p[in + j]);
          }
        });
  else
    forEachReducedRun(
        x.shape(), reduced,
        [&](int64_t in, int64_t out, int64_t n, bool reducedRun) {
          for (int64_t j = 0; j < n; ++j) {
            double &a = acc[reducedRun ? out : out + j];
            double v = p[in + j];
            if (!std::isnan(a) && (std::isnan(v) || v > a))
              a = v; // once NaN, stays NaN (torch.amax propagates it)
          }
        });
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
