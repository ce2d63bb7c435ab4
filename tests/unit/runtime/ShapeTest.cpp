//===- ShapeTest.cpp - data-movement op tests -----------------------------===//
//
// Each op runs on every dtype (element sizes 1, 2, 4 and 8 bytes). Values are
// small integers; i1 stores them mod 2 (TestUtil.h movable).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

void expectMoved(const HostTensor &y, DType t, const Shape &shape,
                 const std::vector<double> &v) {
  expectExact(y, t, shape, movable(t, v));
}

TEST(BroadcastInDim, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor row = makeMovable(t, {3}, {1, 2, 3});
    expectMoved(broadcastInDim(row, {2, 3}, {1}), t, {2, 3},
                {1, 2, 3, 1, 2, 3});
    expectMoved(broadcastInDim(row, {3, 2}, {0}), t, {3, 2},
                {1, 1, 2, 2, 3, 3});
    // Size-1 operand dims repeat.
    HostTensor col = makeMovable(t, {2, 1}, {4, 5});
    expectMoved(broadcastInDim(col, {2, 3}, {0, 1}), t, {2, 3},
                {4, 4, 4, 5, 5, 5});
    // dims need not be increasing: this one is a transpose.
    HostTensor m = makeMovable(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    expectMoved(broadcastInDim(m, {3, 2}, {1, 0}), t, {3, 2},
                {1, 4, 2, 5, 3, 6});
    HostTensor s = makeMovable(t, {}, {7});
    expectMoved(broadcastInDim(s, {2, 2}, {}), t, {2, 2}, {7, 7, 7, 7});
    EXPECT_EQ(broadcastInDim(row, {0, 3}, {1}).shape(), (Shape{0, 3}));
  }
}

TEST(BroadcastInDim, Errors) {
  HostTensor x(DType::F32, {3});
  EXPECT_ERROR(broadcastInDim(x, {2, 4}, {1}),
               {"step.broadcast_in_dim", "size 3", "size 4", "f32 [3]",
                "[2, 4]"});
  EXPECT_ERROR(broadcastInDim(x, {2, 3}, {0, 1}),
               {"step.broadcast_in_dim", "one entry of dims per operand dim"});
  EXPECT_ERROR(broadcastInDim(x, {2, 3}, {2}),
               {"step.broadcast_in_dim", "unique and in [0, 2)"});
  EXPECT_ERROR(broadcastInDim(HostTensor(DType::F32, {3, 3}), {3, 3}, {0, 0}),
               {"step.broadcast_in_dim", "[0, 0]"});
}

TEST(Reshape, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = makeMovable(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    expectMoved(reshape(x, {3, 2}), t, {3, 2}, {1, 2, 3, 4, 5, 6});
    expectMoved(reshape(x, {-1}), t, {6}, {1, 2, 3, 4, 5, 6});
    expectMoved(reshape(x, {1, -1, 2}), t, {1, 3, 2}, {1, 2, 3, 4, 5, 6});
    expectMoved(reshape(makeMovable(t, {1}, {9}), {}), t, {}, {9});
    EXPECT_EQ(reshape(HostTensor(t, {0, 3}), {3, 0}).shape(), (Shape{3, 0}));
    EXPECT_EQ(reshape(HostTensor(t, {0, 3}), {-1, 3}).shape(), (Shape{0, 3}));
  }
}

TEST(Reshape, Errors) {
  HostTensor x(DType::I64, {2, 3});
  EXPECT_ERROR(reshape(x, {4}),
               {"step.reshape", "i64 [2, 3]", "6 elements", "[4]"});
  EXPECT_ERROR(reshape(x, {-1, -1}), {"step.reshape", "at most one"});
  EXPECT_ERROR(reshape(x, {-1, 4}), {"step.reshape", "[-1, 4]"});
  EXPECT_ERROR(reshape(x, {-2, 3}), {"step.reshape", "invalid dim -2"});
  EXPECT_ERROR(reshape(HostTensor(DType::F32, {0}), {0, -1}),
               {"step.reshape", "cannot infer"});
}

TEST(Transpose, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = makeMovable(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    expectMoved(transpose(x, {1, 0}), t, {3, 2}, {1, 4, 2, 5, 3, 6});
    expectMoved(transpose(x, {0, 1}), t, {2, 3}, {1, 2, 3, 4, 5, 6});
    // out[i][j][k] = x[j][k][i] for x [2, 1, 3]: shape [3, 2, 1].
    HostTensor y = makeMovable(t, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
    expectMoved(transpose(y, {2, 0, 1}), t, {3, 2, 1}, {1, 4, 2, 5, 3, 6});
    EXPECT_EQ(transpose(HostTensor(t, {0, 2}), {1, 0}).shape(),
              (Shape{2, 0}));
  }
  // A 3-D permutation that moves every dim: x[a][b][c] = 100a + 10b + c.
  std::vector<double> v;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        v.push_back(100 * a + 10 * b + c);
  HostTensor z = transpose(make(DType::I32, {2, 3, 4}, v), {1, 2, 0});
  ASSERT_EQ(z.shape(), (Shape{3, 4, 2}));
  // z[b][c][a] = x[a][b][c]; z[2][1][1] is flat index (2*4 + 1)*2 + 1 = 19.
  EXPECT_EQ(z.getAsDouble(19), 121);
}

TEST(Transpose, Errors) {
  HostTensor x(DType::F32, {2, 3});
  EXPECT_ERROR(transpose(x, {0, 0}),
               {"step.transpose", "[0, 0]", "permutation", "f32 [2, 3]"});
  EXPECT_ERROR(transpose(x, {1}), {"step.transpose", "[1]"});
  EXPECT_ERROR(transpose(x, {0, 2}), {"step.transpose", "[0, 2]"});
}

TEST(Slice, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    std::vector<double> v;
    for (int i = 0; i < 12; ++i)
      v.push_back(i);
    HostTensor x = makeMovable(t, {3, 4}, v);
    // Rows 0, 2 and columns 1, 3.
    expectMoved(slice(x, {0, 1}, {3, 4}, {2, 2}), t, {2, 2}, {1, 3, 9, 11});
    expectMoved(slice(x, {1, 0}, {2, 4}, {1, 1}), t, {1, 4}, {4, 5, 6, 7});
    // ceil((4 - 1) / 3) = 1 column.
    expectMoved(slice(x, {0, 1}, {3, 4}, {1, 3}), t, {3, 1}, {1, 5, 9});
    EXPECT_EQ(slice(x, {1, 2}, {1, 4}, {1, 1}).shape(), (Shape{0, 2}));
  }
}

TEST(Slice, Errors) {
  HostTensor x(DType::F16, {3, 4});
  EXPECT_ERROR(slice(x, {0, 0}, {3, 5}, {1, 1}),
               {"step.slice", "dim 1", "limit 5", "f16 [3, 4]"});
  EXPECT_ERROR(slice(x, {2, 0}, {1, 4}, {1, 1}), {"step.slice", "start 2"});
  EXPECT_ERROR(slice(x, {0, 0}, {3, 4}, {1, 0}), {"step.slice", "stride 0"});
  EXPECT_ERROR(slice(x, {0}, {3}, {1}), {"step.slice", "one entry per dim"});
}

TEST(Concat, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor a = makeMovable(t, {2, 2}, {1, 2, 3, 4});
    HostTensor b = makeMovable(t, {2, 1}, {5, 6});
    expectMoved(concat({a, b}, 1), t, {2, 3}, {1, 2, 5, 3, 4, 6});
    expectMoved(concat({a, b}, -1), t, {2, 3}, {1, 2, 5, 3, 4, 6});
    HostTensor c = makeMovable(t, {1, 2}, {7, 8});
    expectMoved(concat({a, c, a}, 0), t, {5, 2},
                {1, 2, 3, 4, 7, 8, 1, 2, 3, 4});
    // A zero-size operand contributes nothing.
    expectMoved(concat({a, HostTensor(t, {2, 0}), b}, 1), t, {2, 3},
                {1, 2, 5, 3, 4, 6});
    expectMoved(concat({a}, 0), t, {2, 2}, {1, 2, 3, 4});
  }
}

TEST(Concat, Errors) {
  HostTensor a(DType::F32, {2, 2});
  EXPECT_ERROR(concat({a, HostTensor(DType::F32, {3, 1})}, 1),
               {"step.concat", "operand 1", "f32 [3, 1]", "f32 [2, 2]",
                "dim 1"});
  EXPECT_ERROR(concat({a, HostTensor(DType::I32, {2, 2})}, 0),
               {"step.concat", "i32 [2, 2]"});
  EXPECT_ERROR(concat({}, 0), {"step.concat", "at least one"});
  EXPECT_ERROR(concat({a, a}, 2), {"step.concat", "dim 2 out of range"});
}

TEST(Pad, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = makeMovable(t, {2}, {1, 2});
    expectMoved(pad(x, {1}, {2}, 9), t, {5}, {9, 1, 2, 9, 9});
    HostTensor m = makeMovable(t, {2, 2}, {1, 2, 3, 4});
    expectMoved(pad(m, {1, 0}, {0, 1}, 0), t, {3, 3},
                {0, 0, 0, 1, 2, 0, 3, 4, 0});
    expectMoved(pad(m, {0, 0}, {0, 0}, 5), t, {2, 2}, {1, 2, 3, 4});
    expectMoved(pad(HostTensor(t, {0}), {1}, {1}, 3), t, {2}, {3, 3});
  }
  // The value is converted as setFromDouble: rounded for f16, truncated for
  // integers.
  EXPECT_EQ(bits16(pad(HostTensor(DType::F16, {0}), {1}, {0}, 0.1)),
            (std::vector<uint16_t>{0x2e66}));
  expectExact(pad(HostTensor(DType::I32, {0}), {1}, {0}, -2.7), DType::I32,
              {1}, {-2});
}

TEST(Pad, Errors) {
  HostTensor x(DType::F32, {2});
  EXPECT_ERROR(pad(x, {-1}, {0}, 0), {"step.pad", ">= 0", "[-1]"});
  EXPECT_ERROR(pad(x, {0, 0}, {0}, 0), {"step.pad", "one entry per dim"});
}

TEST(Iota, EveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    // i1 holds i != 0 (setFromDouble's rule), not i mod 2.
    std::vector<double> d1 = {0, 1, 2, 0, 1, 2}, d0 = {0, 0, 0, 1, 1, 1};
    if (t == DType::I1)
      d1 = {0, 1, 1, 0, 1, 1};
    expectExact(iota(t, {2, 3}, 1), t, {2, 3}, d1);
    expectExact(iota(t, {2, 3}, 0), t, {2, 3}, d0);
    expectExact(iota(t, {2, 3}, -2), t, {2, 3}, d0);
    EXPECT_EQ(iota(t, {0, 3}, 1).shape(), (Shape{0, 3}));
  }
  // 2049 is not an f16 value: the tie rounds to 2048.
  EXPECT_EQ(iota(DType::F16, {2050}, 0).getAsDouble(2049), 2048.0);
  EXPECT_ERROR(iota(DType::F32, {2, 3}, 2), {"step.iota", "dim 2"});
  EXPECT_ERROR(iota(DType::F32, {}, 0), {"step.iota", "rank >= 1"});
}

TEST(ShapeOps, Deterministic) {
  HostTensor x = make(DType::BF16, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(transpose(x, {1, 0}).bitwiseEqual(transpose(x, {1, 0})));
  EXPECT_TRUE(pad(x, {1, 1}, {1, 1}, 0.5).bitwiseEqual(
      pad(x, {1, 1}, {1, 1}, 0.5)));
}

/// Row-major coordinates of flat index i in `shape`.
std::vector<int64_t> coords(const Shape &shape, int64_t i) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}

int64_t flat(const Shape &shape, const std::vector<int64_t> &c) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    i = i * shape[d] + c[d];
  return i;
}

// The copies merge dims and copy runs; these check them element by element
// against the ops' definitions, on every element size, with size-1 dims
// among the others: every permutation of a rank-4 transpose, broadcasts
// that repeat inner, outer and middle dims, strided slices.
TEST(ShapeOps, CopiesMatchTheirDefinitionsElementByElement) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtypeName(t));
    const Shape xs = {2, 1, 3, 4};
    std::vector<double> v;
    for (int64_t i = 0; i < 24; ++i)
      v.push_back(static_cast<double>(i));
    HostTensor x = makeMovable(t, xs, v);
    std::vector<int64_t> perm = {0, 1, 2, 3};
    do {
      HostTensor y = transpose(x, perm);
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> c = coords(y.shape(), i), src(4);
        for (size_t d = 0; d < 4; ++d)
          src[perm[d]] = c[d];
        ASSERT_EQ(y.getAsDouble(i), x.getAsDouble(flat(xs, src)))
            << "perm " << shapeToString(perm) << " at " << i;
      }
    } while (std::next_permutation(perm.begin(), perm.end()));

    // [3, 1, 4] into [2, 3, 5, 4] by dims {1, 2, 3}, and [3, 4] into
    // [3, 2, 4] and [3, 4, 2] (a middle and an inner repeat).
    HostTensor b = makeMovable(t, {3, 1, 4},
                               std::vector<double>(v.begin(), v.begin() + 12));
    struct Case {
      HostTensor in;
      Shape out;
      std::vector<int64_t> dims;
    };
    HostTensor b2 = reshape(b, {3, 4});
    for (const Case &k :
         {Case{b, {2, 3, 5, 4}, {1, 2, 3}}, Case{b2, {3, 2, 4}, {0, 2}},
          Case{b2, {3, 4, 2}, {0, 1}}}) {
      HostTensor y = broadcastInDim(k.in, k.out, k.dims);
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> c = coords(k.out, i), src(k.in.rank());
        for (size_t j = 0; j < k.dims.size(); ++j)
          src[j] = k.in.shape()[j] == 1 ? 0 : c[k.dims[j]];
        ASSERT_EQ(y.getAsDouble(i), k.in.getAsDouble(flat(k.in.shape(), src)))
            << "into " << shapeToString(k.out) << " at " << i;
      }
    }

    HostTensor s = slice(x, {1, 0, 0, 1}, {2, 1, 3, 4}, {1, 1, 2, 2});
    ASSERT_EQ(s.shape(), (Shape{1, 1, 2, 2}));
    for (int64_t i = 0; i < s.numel(); ++i) {
      std::vector<int64_t> c = coords(s.shape(), i);
      std::vector<int64_t> src = {1 + c[0], c[1], 2 * c[2], 1 + 2 * c[3]};
      ASSERT_EQ(s.getAsDouble(i), x.getAsDouble(flat(xs, src))) << i;
    }
  }
}

} // namespace
