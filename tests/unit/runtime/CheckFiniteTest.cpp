//===- CheckFiniteTest.cpp - step.check_finite reference kernel tests -----===//
//
// checkFinite is true iff no element of any input is NaN or +-inf. Values
// on the edge of each type (its largest finite value, subnormals, -0) must
// count as finite, and NaNs with any payload as not; the half types are
// tested on raw bit patterns so that nothing depends on a conversion.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

/// The i1 result as a bool, after checking that it is a rank-0 i1 tensor.
bool finite(const std::vector<HostTensor> &inputs) {
  HostTensor r = checkFinite(inputs);
  EXPECT_EQ(r.dtype(), DType::I1);
  EXPECT_EQ(r.shape(), Shape{});
  return r.getAsDouble(0) != 0.0;
}

/// A 1-D tensor of type t (f16 or bf16) holding the raw bits `bits`.
HostTensor halfBits(DType t, const std::vector<uint16_t> &bits) {
  HostTensor x(t, {static_cast<int64_t>(bits.size())});
  std::memcpy(x.raw(), bits.data(), bits.size() * sizeof(uint16_t));
  return x;
}

HostTensor f32Bits(const std::vector<uint32_t> &bits) {
  HostTensor x(DType::F32, {static_cast<int64_t>(bits.size())});
  std::memcpy(x.raw(), bits.data(), bits.size() * sizeof(uint32_t));
  return x;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CheckFinite, FiniteValuesEveryDType) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    EXPECT_TRUE(finite({make(t, {2, 3}, {0, -0.0, 1, -2.5, 1e-3, 7})}));
    EXPECT_TRUE(finite({make(t, {}, {42})}));
  }
  // The largest finite value and the smallest subnormal of each type.
  EXPECT_TRUE(finite({f32Bits({0x7f7fffff, 0xff7fffff, 0x00000001})}));
  EXPECT_TRUE(finite({halfBits(DType::F16, {0x7bff, 0xfbff, 0x0001})}));
  EXPECT_TRUE(finite({halfBits(DType::BF16, {0x7f7f, 0xff7f, 0x0001})}));
}

TEST(CheckFinite, NaNAndInfinitiesEveryDTypeAndPosition) {
  for (DType t : kFloatTypes)
    for (double bad : {kNaN, kInf, -kInf})
      for (int64_t at : {0, 2, 5}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + std::to_string(bad) +
                     " at " + std::to_string(at));
        std::vector<double> v = {1, 2, 3, 4, 5, 6};
        v[at] = bad;
        EXPECT_FALSE(finite({make(t, {2, 3}, v)}));
      }
}

TEST(CheckFinite, NonFiniteBitPatterns) {
  // f32: +inf, -inf, a quiet NaN, a signalling NaN, a negative NaN.
  for (uint32_t b : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                     0xffc00001u})
    EXPECT_FALSE(finite({f32Bits({0, b})})) << std::hex << b;
  // f16: exponent 0x7c00 all ones.
  for (uint16_t b : {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01})
    EXPECT_FALSE(finite({halfBits(DType::F16, {0, b})})) << std::hex << b;
  // bf16: exponent 0x7f80 all ones.
  for (uint16_t b : {0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1})
    EXPECT_FALSE(finite({halfBits(DType::BF16, {0, b})})) << std::hex << b;
}

TEST(CheckFinite, EveryOperandIsChecked) {
  HostTensor good32 = make(DType::F32, {4}, {1, 2, 3, 4});
  HostTensor good16 = make(DType::F16, {2, 2}, {1, 2, 3, 4});
  for (DType t : kFloatTypes)
    for (double bad : {kNaN, kInf, -kInf}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + std::to_string(bad));
      HostTensor b = make(t, {3}, {0, 0, bad});
      // Only the second (or the last) operand is not finite.
      EXPECT_FALSE(finite({good32, b}));
      EXPECT_FALSE(finite({good32, good16, b}));
      EXPECT_FALSE(finite({b, good16}));
      EXPECT_TRUE(finite({good32, good16, make(t, {3}, {0, 0, 1})}));
    }
}

TEST(CheckFinite, EmptyTensorsAreFinite) {
  EXPECT_TRUE(finite({HostTensor(DType::F32, {0})}));
  EXPECT_TRUE(finite({HostTensor(DType::BF16, {2, 0}),
                      HostTensor(DType::F16, {0, 5})}));
  EXPECT_TRUE(finite({HostTensor(DType::F32, {0}),
                      make(DType::F16, {2}, {1, 2})}));
  EXPECT_FALSE(finite({HostTensor(DType::F32, {0}),
                       make(DType::BF16, {2}, {1, kNaN})}));
}

TEST(CheckFinite, Errors) {
  EXPECT_ERROR(checkFinite({}), {"step.check_finite", "at least one input"});
  EXPECT_ERROR(checkFinite({make(DType::F32, {1}, {1}),
                            make(DType::I32, {2}, {1, 2})}),
               {"step.check_finite", "must be f32, f16 or bf16", "i32 [2]"});
  EXPECT_ERROR(checkFinite({HostTensor(DType::I1, {})}),
               {"step.check_finite", "i1 []"});
}

} // namespace
