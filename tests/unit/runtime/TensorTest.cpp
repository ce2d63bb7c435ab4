//===- TensorTest.cpp - HostTensor and dtype helper tests -----------------===//
#include "runtime/Tensor.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace step::rt;
using namespace step::rt::test;

namespace {

TEST(DType, SizesNamesAndClasses) {
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(DType::I32), 4u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeSize(DType::I1), 1u);
  EXPECT_STREQ(dtypeName(DType::F32), "f32");
  EXPECT_STREQ(dtypeName(DType::F16), "f16");
  EXPECT_STREQ(dtypeName(DType::BF16), "bf16");
  EXPECT_STREQ(dtypeName(DType::I32), "i32");
  EXPECT_STREQ(dtypeName(DType::I64), "i64");
  EXPECT_STREQ(dtypeName(DType::I1), "i1");
  for (DType t : kFloatTypes) {
    EXPECT_TRUE(isFloat(t));
    EXPECT_FALSE(isInteger(t));
  }
  for (DType t : kIntTypes) {
    EXPECT_TRUE(isInteger(t));
    EXPECT_FALSE(isFloat(t));
  }
  EXPECT_FALSE(isFloat(DType::I1));
  EXPECT_FALSE(isInteger(DType::I1));
}

TEST(Shape, NumElementsAndToString) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  EXPECT_EQ(numElements({2, 0, 4}), 0);
  EXPECT_EQ(shapeToString({}), "[]");
  EXPECT_EQ(shapeToString({7}), "[7]");
  EXPECT_EQ(shapeToString({2, 3}), "[2, 3]");
}

TEST(HostTensor, ConstructionIsZeroed) {
  for (DType t : kAllTypes) {
    HostTensor x(t, {2, 3});
    EXPECT_EQ(x.dtype(), t);
    EXPECT_EQ(x.rank(), 2);
    EXPECT_EQ(x.numel(), 6);
    EXPECT_EQ(x.byteSize(), 6 * dtypeSize(t));
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_EQ(x.getAsDouble(i), 0.0);
  }
  HostTensor scalar(DType::F32, {});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.byteSize(), 4u);
  HostTensor empty(DType::I64, {3, 0});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.byteSize(), 0u);
}

TEST(HostTensor, RejectsNegativeDims) {
  EXPECT_ERROR(HostTensor(DType::F32, {2, -1}), {"negative", "[2, -1]"});
}

TEST(HostTensor, TypedViewsAreChecked) {
  HostTensor f(DType::F32, {2});
  f.data<float>()[1] = 2.5f;
  EXPECT_EQ(f.getAsDouble(1), 2.5);
  EXPECT_ERROR(f.data<int32_t>(), {"int32_t", "f32"});
  HostTensor h(DType::BF16, {1});
  EXPECT_NO_THROW(h.data<uint16_t>());
  const HostTensor &ch = h;
  EXPECT_ERROR(ch.data<float>(), {"float", "bf16"});
  HostTensor b(DType::I1, {1});
  EXPECT_NO_THROW(b.data<uint8_t>());
  EXPECT_ERROR(b.data<int64_t>(), {"int64_t", "i1"});
}

TEST(HostTensor, SetFromDoubleRoundsPerDType) {
  HostTensor f(DType::F32, {2});
  f.setFromDouble(0, 0.1);
  EXPECT_EQ(f.data<float>()[0], 0.1f);
  HostTensor h(DType::F16, {2});
  h.setFromDouble(0, 0.1); // see HalfTest: 0x2e66
  h.setFromDouble(1, 1e6); // beyond 65504
  EXPECT_EQ(bits16(h), (std::vector<uint16_t>{0x2e66, 0x7c00}));
  HostTensor b(DType::BF16, {1});
  b.setFromDouble(0, 1.0 / 3.0);
  EXPECT_EQ(bits16(b), (std::vector<uint16_t>{0x3eab}));

  HostTensor i(DType::I32, {6});
  const double big = 1e20, nan = std::nan("");
  for (auto [k, v] : std::vector<std::pair<int, double>>{
           {0, 2.7}, {1, -2.7}, {2, big}, {3, -big}, {4, nan}, {5, 7.0}})
    i.setFromDouble(k, v);
  EXPECT_EQ(values(i), (std::vector<double>{2, -2, 2147483647.0,
                                            -2147483648.0, 0, 7}));
  HostTensor l(DType::I64, {3});
  l.setFromDouble(0, 1e19);
  l.setFromDouble(1, -1e19);
  l.setFromDouble(2, 1099511627776.0); // 2^40
  EXPECT_EQ(l.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(l.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(l.data<int64_t>()[2], int64_t(1) << 40);

  HostTensor p(DType::I1, {4});
  p.setFromDouble(0, 0.0);
  p.setFromDouble(1, -3.0);
  p.setFromDouble(2, nan);
  p.setFromDouble(3, 0.5);
  EXPECT_EQ(std::vector<uint8_t>(p.data<uint8_t>(), p.data<uint8_t>() + 4),
            (std::vector<uint8_t>{0, 1, 1, 1}));
}

TEST(HostTensor, GetAsDoubleDecodes) {
  HostTensor h(DType::F16, {1});
  h.data<uint16_t>()[0] = 0xc100;
  EXPECT_EQ(h.getAsDouble(0), -2.5);
  HostTensor b(DType::BF16, {1});
  b.data<uint16_t>()[0] = 0x3f80;
  EXPECT_EQ(b.getAsDouble(0), 1.0);
  HostTensor l(DType::I64, {1});
  l.data<int64_t>()[0] = -5;
  EXPECT_EQ(l.getAsDouble(0), -5.0);
  EXPECT_ERROR(l.getAsDouble(1), {"index 1", "[1]"});
  EXPECT_ERROR(l.setFromDouble(-1, 0.0), {"index -1"});
}

TEST(HostTensor, BitwiseEqual) {
  HostTensor a = make(DType::F32, {2}, {1, 2});
  HostTensor b = make(DType::F32, {2}, {1, 2});
  EXPECT_TRUE(a.bitwiseEqual(b));
  EXPECT_FALSE(a.bitwiseEqual(make(DType::F32, {2}, {1, 3})));
  EXPECT_FALSE(a.bitwiseEqual(make(DType::F32, {2, 1}, {1, 2})));
  EXPECT_FALSE(a.bitwiseEqual(make(DType::I32, {2}, {1, 2})));
  // -0.0 == 0.0 numerically but not bitwise.
  EXPECT_FALSE(make(DType::F32, {1}, {0.0})
                   .bitwiseEqual(make(DType::F32, {1}, {-0.0})));
}

} // namespace
