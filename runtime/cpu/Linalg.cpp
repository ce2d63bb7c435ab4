//===- Linalg.cpp - step.matmul -------------------------------------------===//
//
// Batched matrix product through OpenBLAS sgemm, one call per batch entry
// (detail::gemm; its f64 twin through dgemm runs the attention kernels'
// tiles). OpenBLAS runs single-threaded: a product splits into blocks of
// 128 rows, one sgemm each, fixed by the shape, which the update threads
// (updateThreads()) share when each gets 16 MFLOP or more; so the bits do
// not depend on the machine's cores or OPENBLAS_NUM_THREADS (they did with
// OpenBLAS's own threads), only on OpenBLAS's kernels for the CPU.
// Transposes are expressed through sgemm's trans flags and leading dimensions
// so f32 operands are never copied. f16/bf16 are widened to f32 first (as
// PyTorch's CPU path accumulates half types in float) and rounded once.
// Without OpenBLAS (STEP_HAVE_OPENBLAS undefined: a runtime-only build on a
// machine lacking it) a plain loop accumulating in the element type stands
// in.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelUtil.h"

#include <algorithm>
#include <climits>
#include <type_traits>

#ifdef STEP_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace step::rt::cpu {

using namespace detail;

#ifdef STEP_HAVE_OPENBLAS
/// Rows of C per BLAS call, and the work below which one thread does all.
constexpr int64_t kBlockRows = 128;
constexpr int64_t kMinFlopsPerThread = int64_t(1) << 24;

/// OpenBLAS's own threads off (whoever set them): its results depend on
/// its thread count (every shape tried with 1 and 2 threads, OpenBLAS
/// 0.3.21), and its idle threads spin.
static void singleThreadedBlas() {
  if (openblas_get_num_threads() != 1)
    openblas_set_num_threads(1);
}
#endif

template <typename T>
static void gemmT(const GemmDims &g, const T *a, const T *b, T *c) {
  if (g.m == 0 || g.n == 0)
    return;
  // BLAS leaves C untouched, or may read it, when k == 0: the product of
  // nothing is zero.
  if (g.k == 0) {
    if (!g.accumulate)
      std::fill(c, c + g.m * g.n, T(0));
    return;
  }
  // Row-major leading dimension = the stored matrix's column count.
  int64_t lda = g.transA ? g.m : g.k;
  int64_t ldb = g.transB ? g.k : g.n;
#ifdef STEP_HAVE_OPENBLAS
  singleThreadedBlas();
  auto ta = g.transA ? CblasTrans : CblasNoTrans;
  auto tb = g.transB ? CblasTrans : CblasNoTrans;
  int n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  T beta = g.accumulate ? T(1) : T(0);
  // Rows [i0, i1) of C from rows [i0, i1) of op(A): A's rows, or its
  // columns when transposed.
  auto rows = [&](int64_t i0, int64_t i1) {
    const T *ai = g.transA ? a + i0 : a + i0 * lda;
    int m = static_cast<int>(i1 - i0);
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, ai,
                  static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                  c + i0 * g.n, n);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, ai,
                  static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                  c + i0 * g.n, n);
  };
  // Blocks of kBlockRows rows, fixed by the shape alone, each one
  // single-threaded BLAS call: the bits never depend on how many threads
  // share the blocks (OpenBLAS's own threading changes them).
  int64_t blocks = (g.m + kBlockRows - 1) / kBlockRows;
  int64_t flopsPerBlock = 2 * std::min(g.m, kBlockRows) * g.n * g.k;
  if (blocks == 1) {
    rows(0, g.m);
    return;
  }
  forRanges(blocks, std::max<int64_t>(1, kMinFlopsPerThread / flopsPerBlock),
            updateThreads(), [&](int64_t b0, int64_t b1) {
              for (int64_t blk = b0; blk < b1; ++blk)
                rows(blk * kBlockRows, std::min(g.m, (blk + 1) * kBlockRows));
            });
#else
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      T acc = T(0);
      for (int64_t p = 0; p < g.k; ++p) {
        T av = g.transA ? a[p * lda + i] : a[i * lda + p];
        T bv = g.transB ? b[j * ldb + p] : b[p * ldb + j];
        acc += av * bv;
      }
      c[i * g.n + j] = g.accumulate ? c[i * g.n + j] + acc : acc;
    }
#endif
}

void detail::gemm(const GemmDims &g, const float *a, const float *b,
                  float *c) {
  gemmT(g, a, b, c);
}

void detail::gemm(const GemmDims &g, const double *a, const double *b,
                  double *c) {
  gemmT(g, a, b, c);
}

HostTensor matmul(const HostTensor &a, const HostTensor &b, bool transposeA,
                  bool transposeB) {
  const char *op = "matmul";
  auto describe = [&] {
    return "lhs " + typeStr(a) + (transposeA ? " (transposed)" : "") +
           ", rhs " + typeStr(b) + (transposeB ? " (transposed)" : "");
  };
  requireFloat(op, a, "lhs");
  if (a.dtype() != b.dtype())
    fail(op, "operands must have the same dtype; " + describe());
  if (a.rank() < 2)
    fail(op, "lhs must have rank >= 2; " + describe());
  if (b.rank() != 2 && b.rank() != a.rank())
    fail(op, "rhs must have rank 2 or the rank of lhs (" +
                 std::to_string(a.rank()) + "); " + describe());
  const Shape &as = a.shape(), &bs = b.shape();
  size_t ra = as.size(), rb = bs.size();
  if (rb == ra)
    for (size_t i = 0; i + 2 < ra; ++i)
      if (as[i] != bs[i])
        fail(op, "leading (batch) dims must be equal; " + describe());
  GemmDims g;
  g.transA = transposeA;
  g.transB = transposeB;
  g.m = transposeA ? as[ra - 1] : as[ra - 2];
  g.k = transposeA ? as[ra - 2] : as[ra - 1];
  int64_t kb = transposeB ? bs[rb - 1] : bs[rb - 2];
  g.n = transposeB ? bs[rb - 2] : bs[rb - 1];
  if (kb != g.k)
    fail(op, "contracting dims differ: lhs has K = " + std::to_string(g.k) +
                 ", rhs has K = " + std::to_string(kb) + "; " + describe());
  if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX)
    fail(op, "matrix dims exceed the BLAS int range; " + describe());

  Shape out(as.begin(), as.end() - 2);
  out.push_back(g.m);
  out.push_back(g.n);
  HostTensor y(a.dtype(), out);
  int64_t batch = prodDims(as, 0, ra - 2);
  int64_t aStride = g.m * g.k, cStride = g.m * g.n;
  int64_t bStride = rb == 2 ? 0 : g.k * g.n; // rank-2 rhs is shared

  if (a.dtype() == DType::F32) {
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float *pc = y.data<float>();
    for (int64_t i = 0; i < batch; ++i)
      gemm(g, pa + i * aStride, pb + i * bStride, pc + i * cStride);
    return y;
  }
  FloatIn fa(a), fb(b);
  std::vector<float> c(static_cast<size_t>(y.numel()));
  for (int64_t i = 0; i < batch; ++i)
    gemm(g, fa.data() + i * aStride, fb.data() + i * bStride,
         c.data() + i * cStride);
  for (int64_t i = 0, n = y.numel(); i < n; ++i)
    storeF(y.dtype(), y.raw(), i, c[i]);
  return y;
}

} // namespace step::rt::cpu
