//===- ReduceTest.cpp - reduce_sum / reduce_max / reduce_mean tests -------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

// x = [[1, 2, 3], [4, 5, 6]] throughout.
const std::vector<double> kX = {1, 2, 3, 4, 5, 6};

TEST(Reduce, SumEveryNumericDType) {
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), kIntTypes.begin(), kIntTypes.end());
  for (DType t : types) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = make(t, {2, 3}, kX);
    expectExact(reduce(ReduceOp::Sum, x, {0}, false), t, {3}, {5, 7, 9});
    expectExact(reduce(ReduceOp::Sum, x, {1}, false), t, {2}, {6, 15});
    expectExact(reduce(ReduceOp::Sum, x, {-1}, false), t, {2}, {6, 15});
    expectExact(reduce(ReduceOp::Sum, x, {0, 1}, false), t, {}, {21});
    expectExact(reduce(ReduceOp::Sum, x, {1, 0}, true), t, {1, 1}, {21});
    expectExact(reduce(ReduceOp::Sum, x, {1}, true), t, {2, 1}, {6, 15});
    // No dims: an identity copy.
    expectExact(reduce(ReduceOp::Sum, x, {}, false), t, {2, 3}, kX);
    // Sum over nothing is 0.
    expectExact(reduce(ReduceOp::Sum, HostTensor(t, {0, 3}), {0}, false), t,
                {3}, {0, 0, 0});
  }
}

TEST(Reduce, SumMiddleDimOf3D) {
  // x[a][b][c] = 100a + 10b + c over [2, 3, 2]; summing b gives
  // 3 * (100a + c) + 30.
  std::vector<double> v;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c)
        v.push_back(100 * a + 10 * b + c);
  expectExact(reduce(ReduceOp::Sum, make(DType::F32, {2, 3, 2}, v), {1},
                     false),
              DType::F32, {2, 2}, {30, 33, 330, 333});
  expectExact(reduce(ReduceOp::Sum, make(DType::I64, {2, 3, 2}, v), {0, 2},
                     true),
              DType::I64, {1, 3, 1}, {202, 242, 282});
}

TEST(Reduce, SumAccumulatesInDouble) {
  // In f16, 2048 + 1 rounds back to 2048 (tie, even), so summing in f16
  // would give 2048; the exact sum 2050 is an f16 value.
  expectExact(reduce(ReduceOp::Sum, make(DType::F16, {3}, {2048, 1, 1}), {0},
                     false),
              DType::F16, {}, {2050});
  // In f32, 2^24 + 1 + 1 would stay 2^24 one step at a time.
  expectExact(reduce(ReduceOp::Sum, make(DType::F32, {3}, {0x1p24, 1, 1}),
                     {0}, false),
              DType::F32, {}, {0x1p24 + 2});
}

TEST(Reduce, IntegerSumWraps) {
  const double mx = std::numeric_limits<int32_t>::max();
  expectExact(reduce(ReduceOp::Sum, make(DType::I32, {2}, {mx, 1}), {0},
                     false),
              DType::I32, {}, {-2147483648.0});
}

TEST(Reduce, MaxEveryDType) {
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), kIntTypes.begin(), kIntTypes.end());
  for (DType t : types) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = make(t, {2, 3}, {1, -2, 3, -4, 5, -6});
    expectExact(reduce(ReduceOp::Max, x, {0}, false), t, {3}, {1, 5, 3});
    expectExact(reduce(ReduceOp::Max, x, {1}, true), t, {2, 1}, {3, 5});
    expectExact(reduce(ReduceOp::Max, make(t, {2}, {-7, -9}), {0}, false), t,
                {}, {-7});
  }
  // i1: max is any().
  expectExact(reduce(ReduceOp::Max, make(DType::I1, {2, 2}, {0, 1, 0, 0}),
                     {1}, false),
              DType::I1, {2}, {1, 0});
  // Integer extremes.
  HostTensor l(DType::I64, {2});
  l.data<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  l.data<int64_t>()[1] = std::numeric_limits<int64_t>::min() + 1;
  EXPECT_EQ(reduce(ReduceOp::Max, l, {0}, false).data<int64_t>()[0],
            std::numeric_limits<int64_t>::min() + 1);
}

TEST(Reduce, MaxPropagatesNaNAndHandlesInf) {
  for (DType t : kFloatTypes) {
    HostTensor x = make(t, {2, 3}, {1, NAN, 3, -INFINITY, -INFINITY, 2});
    expectExact(reduce(ReduceOp::Max, x, {1}, false), t, {2}, {NAN, 2});
    expectExact(reduce(ReduceOp::Max, x, {0}, false), t, {3}, {1, NAN, 3});
    // NaN first, then larger values: still NaN.
    expectExact(reduce(ReduceOp::Max, make(t, {3}, {NAN, 5, 7}), {0}, false),
                t, {}, {NAN});
    expectExact(reduce(ReduceOp::Max, make(t, {2}, {-INFINITY, -INFINITY}),
                       {0}, false),
                t, {}, {-INFINITY});
  }
}

TEST(Reduce, MeanFloatTypes) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = make(t, {2, 3}, kX);
    expectExact(reduce(ReduceOp::Mean, x, {1}, false), t, {2}, {2, 5});
    expectExact(reduce(ReduceOp::Mean, x, {0}, true), t, {1, 3},
                {2.5, 3.5, 4.5});
    expectExact(reduce(ReduceOp::Mean, x, {0, 1}, false), t, {}, {3.5});
    // Mean over nothing is 0/0 = NaN (torch.mean).
    expectExact(reduce(ReduceOp::Mean, HostTensor(t, {0, 2}), {0}, false), t,
                {2}, {NAN, NAN});
  }
  // 1/3 rounded once: f16 0x3555, bf16 0x3eab (see HalfTest).
  EXPECT_EQ(bits16(reduce(ReduceOp::Mean, make(DType::F16, {3}, {1, 0, 0}),
                          {0}, false)),
            (std::vector<uint16_t>{0x3555}));
  EXPECT_EQ(bits16(reduce(ReduceOp::Mean, make(DType::BF16, {3}, {1, 0, 0}),
                          {0}, false)),
            (std::vector<uint16_t>{0x3eab}));
}

TEST(Reduce, ZeroSizeKeptDims) {
  // Reducing a non-empty dim of a tensor whose other dim is 0.
  HostTensor x(DType::F32, {0, 3});
  EXPECT_EQ(reduce(ReduceOp::Max, x, {1}, false).shape(), (Shape{0}));
  EXPECT_EQ(reduce(ReduceOp::Sum, x, {1}, true).shape(), (Shape{0, 1}));
}

TEST(Reduce, Errors) {
  HostTensor x(DType::F32, {2, 3});
  EXPECT_ERROR(reduce(ReduceOp::Sum, x, {0, 0}, false),
               {"step.reduce_sum", "[0, 0]", "repeat", "f32 [2, 3]"});
  EXPECT_ERROR(reduce(ReduceOp::Sum, x, {0, -2}, false),
               {"step.reduce_sum", "repeat"});
  EXPECT_ERROR(reduce(ReduceOp::Max, x, {2}, false),
               {"step.reduce_max", "dim 2 out of range for rank 2"});
  EXPECT_ERROR(reduce(ReduceOp::Max, HostTensor(DType::F32, {0, 3}), {0},
                      false),
               {"step.reduce_max", "zero elements", "f32 [0, 3]"});
  EXPECT_ERROR(reduce(ReduceOp::Mean, HostTensor(DType::I32, {2}), {0}, false),
               {"step.reduce_mean", "f32, f16 or bf16", "i32 [2]"});
  EXPECT_ERROR(reduce(ReduceOp::Sum, HostTensor(DType::I1, {2}), {0}, false),
               {"step.reduce_sum", "i1 [2]"});
}

TEST(Reduce, Deterministic) {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i)
    v.push_back(std::sin(i * 0.37) * 1000);
  HostTensor x = make(DType::F32, {10, 100}, v);
  EXPECT_TRUE(reduce(ReduceOp::Sum, x, {0}, false)
                  .bitwiseEqual(reduce(ReduceOp::Sum, x, {0}, false)));
  EXPECT_TRUE(reduce(ReduceOp::Mean, x, {1}, false)
                  .bitwiseEqual(reduce(ReduceOp::Mean, x, {1}, false)));
}

// The kernel walks runs of merged dims; this walks element by element, the
// definition: every element's output slot from its coordinates, float sums
// in double in increasing input order. Every subset of the dims of shapes
// with size-1 dims between others, bit for bit.
TEST(Reduce, EveryDimSubsetMatchesTheElementWalk) {
  const std::vector<Shape> shapes = {
      {3, 1, 4, 5}, {2, 3, 1, 2, 3}, {1, 7}, {4, 1}, {5}, {1, 1, 3}};
  for (const Shape &shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(std::sin(i * 1.7 + 0.3) * std::ldexp(1.0, i % 23 - 11));
    size_t rank = shape.size();
    for (unsigned mask = 0; mask < (1u << rank); ++mask) {
      std::vector<int64_t> dims;
      for (size_t d = 0; d < rank; ++d)
        if (mask >> d & 1)
          dims.push_back(static_cast<int64_t>(d));
      SCOPED_TRACE(shapeToString(shape) + " dims " + shapeToString(dims));
      // Output strides over the kept dims.
      std::vector<int64_t> outStride(rank, 0);
      int64_t m = 1;
      for (size_t d = rank; d-- > 0;)
        if (!(mask >> d & 1)) {
          outStride[d] = m;
          m *= shape[d];
        }
      std::vector<double> sum(m, 0.0), mx(m, -INFINITY);
      std::vector<int64_t> isum(m, 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t o = 0;
        for (size_t d = rank, rest = i; d-- > 0;) {
          o += static_cast<int64_t>(rest % shape[d]) * outStride[d];
          rest /= shape[d];
        }
        double x = static_cast<float>(v[i]);
        sum[o] += x;
        mx[o] = std::max(mx[o], x);
        isum[o] += static_cast<int64_t>(std::lround(v[i] * 100));
      }
      HostTensor x = make(DType::F32, shape, v);
      HostTensor got = reduce(ReduceOp::Sum, x, dims, false);
      HostTensor gotMax = reduce(ReduceOp::Max, x, dims, true);
      ASSERT_EQ(got.numel(), m);
      for (int64_t o = 0; o < m; ++o) {
        EXPECT_EQ(got.data<float>()[o], static_cast<float>(sum[o])) << o;
        EXPECT_EQ(gotMax.data<float>()[o], static_cast<float>(mx[o])) << o;
      }
      std::vector<double> iv;
      for (double e : v)
        iv.push_back(static_cast<double>(std::lround(e * 100)));
      HostTensor gi =
          reduce(ReduceOp::Sum, make(DType::I64, shape, iv), dims, false);
      for (int64_t o = 0; o < m; ++o)
        EXPECT_EQ(gi.data<int64_t>()[o], isum[o]) << o;
    }
  }
}

} // namespace
