//===- LinalgTest.cpp - step.matmul tests ---------------------------------===//
//
// Small products are worked by hand; a larger one is checked against a
// textbook triple loop in double written here (the kernel uses sgemm).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

#ifdef STEP_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int);
#endif

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

// A = [[1, 2, 3], [4, 5, 6]], B = [[7, 8], [9, 10], [11, 12]]:
// A B = [[1*7 + 2*9 + 3*11, 1*8 + 2*10 + 3*12], [4*7 + 5*9 + 6*11, ...]]
//     = [[58, 64], [139, 154]], every entry exact in f16 and bf16.
const std::vector<double> kA = {1, 2, 3, 4, 5, 6};
const std::vector<double> kAT = {1, 4, 2, 5, 3, 6}; // A^T stored [3, 2]
const std::vector<double> kB = {7, 8, 9, 10, 11, 12};
const std::vector<double> kBT = {7, 9, 11, 8, 10, 12}; // B^T stored [2, 3]
const std::vector<double> kAB = {58, 64, 139, 154};

TEST(Matmul, EveryFloatDTypeAndTransposes) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor a = make(t, {2, 3}, kA), at = make(t, {3, 2}, kAT);
    HostTensor b = make(t, {3, 2}, kB), bt = make(t, {2, 3}, kBT);
    expectExact(matmul(a, b, false, false), t, {2, 2}, kAB);
    expectExact(matmul(at, b, true, false), t, {2, 2}, kAB);
    expectExact(matmul(a, bt, false, true), t, {2, 2}, kAB);
    expectExact(matmul(at, bt, true, true), t, {2, 2}, kAB);
    // B A = [[7+32, 14+40, 21+48], [9+40, 18+50, 27+60], [11+48, 22+60,
    // 33+72]].
    expectExact(matmul(b, a, false, false), t, {3, 3},
                {39, 54, 69, 49, 68, 87, 59, 82, 105});
  }
}

TEST(Matmul, Batched) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    // Batch 0 is A B; batch 1 is the identity times B^T-shaped [2, 3]...
    // kept simple: batch 1 is [[1, 0], [0, 1]] @ [[1, 2], [3, 4]].
    HostTensor a = make(t, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
    HostTensor b = make(t, {2, 3, 2},
                        {7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6});
    expectExact(matmul(a, b, false, false), t, {2, 2, 2},
                {58, 64, 139, 154, 1, 2, 3, 4});
    // A rank-2 rhs is shared by every batch entry.
    HostTensor shared = make(t, {3, 2}, kB);
    expectExact(matmul(a, shared, false, false), t, {2, 2, 2},
                {58, 64, 139, 154, 7, 8, 9, 10});
    // Two leading dims, with transposeB on a shared rhs.
    HostTensor a4 = make(t, {1, 2, 2, 3},
                         {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
    expectExact(matmul(a4, make(t, {2, 3}, kBT), false, true), t,
                {1, 2, 2, 2}, {58, 64, 139, 154, 7, 8, 9, 10});
  }
}

TEST(Matmul, ZeroSizes) {
  for (DType t : kFloatTypes) {
    // K = 0: an empty sum, all zeros.
    expectExact(matmul(HostTensor(t, {2, 0}), HostTensor(t, {0, 3}), false,
                       false),
                t, {2, 3}, {0, 0, 0, 0, 0, 0});
    EXPECT_EQ(matmul(HostTensor(t, {0, 2, 3}), HostTensor(t, {0, 3, 4}),
                     false, false)
                  .shape(),
              (Shape{0, 2, 4}));
    EXPECT_EQ(matmul(HostTensor(t, {0, 3}), HostTensor(t, {3, 4}), false,
                     false)
                  .shape(),
              (Shape{0, 4}));
  }
}

TEST(Matmul, RoundsOnceOnStore) {
  // [1, 1] @ [1, 2^-11]^T = 1 + 2^-11, exact in f32 and the f16 tie between
  // 1.0 (even) and 1 + 2^-10.
  HostTensor a = make(DType::F16, {1, 2}, {1, 1});
  HostTensor b = make(DType::F16, {2, 1}, {1, 0x1p-11});
  EXPECT_EQ(bits16(matmul(a, b, false, false)),
            (std::vector<uint16_t>{0x3c00}));
  HostTensor c = make(DType::BF16, {1, 2}, {1, 1});
  HostTensor d = make(DType::BF16, {2, 1}, {1 + 0x1p-7, 0x1p-8});
  // 1 + 2^-7 + 2^-8: tie between 0x3f81 (odd) and 0x3f82.
  EXPECT_EQ(bits16(matmul(c, d, false, false)),
            (std::vector<uint16_t>{0x3f82}));
}

TEST(Matmul, MatchesNaiveProductAndIsDeterministic) {
  const int64_t m = 37, k = 53, n = 29;
  std::vector<double> av, bv;
  for (int64_t i = 0; i < m * k; ++i)
    av.push_back(std::sin(0.1 * i));
  for (int64_t i = 0; i < k * n; ++i)
    bv.push_back(std::cos(0.07 * i));
  HostTensor a = make(DType::F32, {m, k}, av);
  HostTensor b = make(DType::F32, {k, n}, bv);
  HostTensor c = matmul(a, b, false, false);
  std::vector<double> want(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        want[i * n + j] += a.getAsDouble(i * k + p) * b.getAsDouble(p * n + j);
  // f32 accumulation of 53 terms of magnitude <= 1: absolute error well
  // below 53 * 2^-24 * |sum of |terms|| <= 53 * 53 * 6e-8.
  expectValues(c, DType::F32, {m, n}, want, 2e-4);
  EXPECT_TRUE(c.bitwiseEqual(matmul(a, b, false, false)));
}

// A product big enough to split into row blocks that the update threads
// share: the same bits for 1 to 4 threads, each transpose, and right
// (every element against a double product), where OpenBLAS's own
// threading gave other bits with 1 and 2 threads.
TEST(Matmul, RowBlocksGiveTheSameBitsForEveryThreadCount) {
  const int64_t m = 300, k = 96, n = 320; // 3 blocks of up to 128 rows
  std::vector<double> av, bv;
  for (int64_t i = 0; i < m * k; ++i)
    av.push_back(std::sin(0.37 * i) * (1 + i % 7));
  for (int64_t i = 0; i < k * n; ++i)
    bv.push_back(std::cos(0.11 * i));
  for (int t = 0; t < 4; ++t) {
    bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(std::string(ta ? "A^T " : "A ") + (tb ? "B^T" : "B"));
    HostTensor a = make(DType::F32, ta ? Shape{k, m} : Shape{m, k}, av);
    HostTensor b = make(DType::F32, tb ? Shape{n, k} : Shape{k, n}, bv);
    std::vector<HostTensor> got;
    for (int threads : {1, 2, 3, 4}) {
      setUpdateThreads(threads);
#ifdef STEP_HAVE_OPENBLAS
      openblas_set_num_threads(threads); // the kernel must undo this
#endif
      got.push_back(matmul(a, b, ta, tb));
      EXPECT_TRUE(got.back().bitwiseEqual(got[0])) << threads << " threads";
    }
    setUpdateThreads(0);
    std::vector<double> want(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        double x = a.getAsDouble(ta ? p * m + i : i * k + p);
        for (int64_t j = 0; j < n; ++j)
          want[i * n + j] += x * b.getAsDouble(tb ? j * k + p : p * n + j);
      }
    // 96 terms of magnitude <= 7: f32 error well below 96 * 7 * 2^-24 * 96.
    expectValues(got[0], DType::F32, {m, n}, want, 1e-3);
  }
}

TEST(Matmul, Errors) {
  HostTensor a(DType::F32, {2, 3});
  EXPECT_ERROR(matmul(a, HostTensor(DType::F32, {4, 2}), false, false),
               {"step.matmul", "K = 3", "K = 4", "f32 [2, 3]", "f32 [4, 2]"});
  // transposeB: [3, 2] stored is [N = 3, K = 2].
  EXPECT_ERROR(matmul(a, HostTensor(DType::F32, {3, 2}), false, true),
               {"step.matmul", "K = 3", "K = 2", "(transposed)"});
  EXPECT_ERROR(matmul(a, HostTensor(DType::F16, {3, 2}), false, false),
               {"step.matmul", "same dtype", "f16 [3, 2]"});
  EXPECT_ERROR(matmul(HostTensor(DType::I32, {2, 3}),
                      HostTensor(DType::I32, {3, 2}), false, false),
               {"step.matmul", "f32, f16 or bf16", "i32 [2, 3]"});
  EXPECT_ERROR(matmul(HostTensor(DType::F32, {3}),
                      HostTensor(DType::F32, {3, 2}), false, false),
               {"step.matmul", "rank >= 2", "f32 [3]"});
  EXPECT_ERROR(matmul(HostTensor(DType::F32, {2, 2, 3}),
                      HostTensor(DType::F32, {3, 3, 2}), false, false),
               {"step.matmul", "batch", "f32 [2, 2, 3]", "f32 [3, 3, 2]"});
  EXPECT_ERROR(matmul(HostTensor(DType::F32, {2, 2, 2, 3}),
                      HostTensor(DType::F32, {2, 3, 2}), false, false),
               {"step.matmul", "rank 2 or the rank of lhs"});
}

} // namespace
