//===- HalfTest.cpp - f16/bf16 conversion tests ---------------------------===//
//
// Expected patterns are derived by hand from the IEEE layouts: f16 is
// 1/5/10 bits with bias 15, bf16 is the top 16 bits of a float.
//
//===----------------------------------------------------------------------===//
#include "runtime/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace step::rt;

namespace {

float f32(uint32_t bits) { return bitsToFloat(bits); }

TEST(Half, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(floatToHalf(f), h) << std::hex << "pattern 0x" << h;
  }
}

TEST(Half, ExhaustiveValuesAreMonotonic) {
  // Positive finite patterns in increasing order decode to increasing values.
  for (uint32_t h = 1; h < 0x7c00; ++h)
    ASSERT_LT(halfToFloat(h - 1), halfToFloat(h)) << std::hex << h;
}

TEST(Half, KnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);          // largest finite
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  // 1/3 = 0.010101..b: 1.0101010101|0101.. x 2^-2, the dropped bits are
  // below half an ulp, so the mantissa is 0101010101 and exponent 13.
  EXPECT_EQ(floatToHalf(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f); // 1365 / 4096
  // 0.1 = 1.6 x 2^-4 -> mantissa round(0.6 * 1024 = 614.4) = 614 = 0x266.
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(floatToHalf(-2.5f), 0xc100);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
}

TEST(Half, RoundsToNearestEven) {
  float ulp = std::ldexp(1.0f, -10); // f16 spacing in [1, 2)
  // 1 + ulp/2: tie between 0x3c00 (even) and 0x3c01.
  EXPECT_EQ(floatToHalf(1.0f + ulp / 2), 0x3c00);
  // 1 + 3ulp/2: tie between 0x3c01 and 0x3c02 (even).
  EXPECT_EQ(floatToHalf(1.0f + 3 * ulp / 2), 0x3c02);
  // Just above the tie rounds up.
  EXPECT_EQ(floatToHalf(1.0f + ulp / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  // Just below the tie rounds down.
  EXPECT_EQ(floatToHalf(1.0f + 3 * ulp / 2 - std::ldexp(1.0f, -20)), 0x3c01);
  // 2049 lies halfway between 2048 and 2050; 2048's mantissa is even.
  EXPECT_EQ(halfToFloat(floatToHalf(2049.0f)), 2048.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(2051.0f)), 2052.0f);
}

TEST(Half, Overflow) {
  // 65520 is halfway between 65504 (0x7bff, odd) and 65536 (inf's place).
  EXPECT_EQ(floatToHalf(65519.996f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(Half, Subnormals) {
  float unit = std::ldexp(1.0f, -24); // value of pattern 0x0001
  EXPECT_EQ(floatToHalf(unit), 0x0001);
  EXPECT_EQ(floatToHalf(-unit), 0x8001);
  EXPECT_EQ(floatToHalf(5 * unit), 0x0005);
  // unit/2 ties between 0 (even) and 1.
  EXPECT_EQ(floatToHalf(unit / 2), 0x0000);
  EXPECT_EQ(floatToHalf(unit / 2 * 1.0000001f), 0x0001);
  EXPECT_EQ(floatToHalf(unit / 4), 0x0000);
  // 1.5 units ties between 1 and 2 (even); 2.5 between 2 (even) and 3.
  EXPECT_EQ(floatToHalf(1.5f * unit), 0x0002);
  EXPECT_EQ(floatToHalf(2.5f * unit), 0x0002);
  EXPECT_EQ(floatToHalf(2.75f * unit), 0x0003);
  // Halfway between the largest subnormal 0x3ff and the smallest normal
  // 0x400 (even): rounds up into the normal range.
  EXPECT_EQ(floatToHalf(1023.5f * unit), 0x0400);
  EXPECT_EQ(floatToHalf(1022.5f * unit), 0x03fe);
  // Float subnormals are far below f16's range.
  EXPECT_EQ(floatToHalf(f32(0x00000001)), 0x0000);
  EXPECT_EQ(floatToHalf(f32(0x80400000)), 0x8000);
}

TEST(Half, InfAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalf(inf), 0x7c00);
  EXPECT_EQ(floatToHalf(-inf), 0xfc00);
  EXPECT_EQ(halfToFloat(0x7c00), inf);
  EXPECT_EQ(halfToFloat(0xfc00), -inf);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(halfToFloat(0xfe00)));
  uint16_t qnan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7c00, 0x7c00);
  EXPECT_NE(qnan & 0x03ff, 0);
  // A float NaN whose payload is only in the bits f16 drops must not turn
  // into infinity.
  EXPECT_EQ(floatToHalf(f32(0x7f800001)), 0x7c01);
  EXPECT_EQ(floatToHalf(f32(0xff800001)), 0xfc01);
}

TEST(BF16, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = bf16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(floatToBF16(f), b) << std::hex << "pattern 0x" << b;
  }
}

TEST(BF16, KnownValuesAndTies) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xc040), -3.0f);
  // 1/3 = 0x3eaaaaab: the dropped half 0xaaab is above 0x8000, round up.
  EXPECT_EQ(floatToBF16(1.0f / 3.0f), 0x3eab);
  EXPECT_EQ(bf16ToFloat(0x3eab), 0.333984375f);
  EXPECT_EQ(floatToBF16(f32(0x3f808000)), 0x3f80); // tie, keep even 0x3f80
  EXPECT_EQ(floatToBF16(f32(0x3f818000)), 0x3f82); // tie, 0x3f81 odd -> up
  EXPECT_EQ(floatToBF16(f32(0x3f808001)), 0x3f81); // above the tie
  EXPECT_EQ(floatToBF16(f32(0x3f817fff)), 0x3f81); // below the tie
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
}

TEST(BF16, OverflowSubnormalsInfNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  // FLT_MAX = 0x7f7fffff rounds past the largest bf16 0x7f7f to inf.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(f32(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(floatToBF16(inf), 0x7f80);
  EXPECT_EQ(floatToBF16(-inf), 0xff80);
  EXPECT_EQ(floatToBF16(f32(0x00008000)), 0x0000); // tie with 0 (even)
  EXPECT_EQ(floatToBF16(f32(0x00018000)), 0x0002); // tie, 1 odd -> 2
  EXPECT_EQ(floatToBF16(f32(0x00010000)), 0x0001);
  EXPECT_EQ(bf16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7fc0)));
  uint16_t n = floatToBF16(f32(0x7f800001)); // payload only in low bits
  EXPECT_TRUE(std::isnan(bf16ToFloat(n)));
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::quiet_NaN()) & 0x7fc0,
            0x7fc0);
}

TEST(DoubleRounding, DoubleToHalfRoundsOnce) {
  // 1 + 2^-11 + 2^-40: above the f16 tie at 1 + 2^-11, so 0x3c01. Going
  // through float first loses the 2^-40 and lands on the tie (-> 0x3c00).
  double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(floatToHalf(static_cast<float>(v)), 0x3c00);
  EXPECT_EQ(doubleToHalf(v), 0x3c01);
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3c00); // exact tie
  EXPECT_EQ(doubleToHalf(-v), 0xbc01);
  EXPECT_EQ(doubleToHalf(1e300), 0x7c00);
  EXPECT_EQ(doubleToHalf(1e-300), 0x0000);
  EXPECT_EQ(doubleToHalf(0.1), 0x2e66);
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -25) * (1 + 1e-12)), 0x0001);
  EXPECT_TRUE(std::isnan(halfToFloat(doubleToHalf(NAN))));
}

TEST(DoubleRounding, DoubleToBF16RoundsOnce) {
  double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(floatToBF16(static_cast<float>(v)), 0x3f80);
  EXPECT_EQ(doubleToBF16(v), 0x3f81);
  EXPECT_EQ(doubleToBF16(1.0 + std::ldexp(1.0, -8)), 0x3f80);
  EXPECT_EQ(doubleToBF16(1e300), 0x7f80);
  EXPECT_EQ(doubleToBF16(-1e300), 0xff80);
  EXPECT_EQ(doubleToBF16(1e-300), 0x0000);
  EXPECT_EQ(doubleToBF16(1.0 / 3.0), 0x3eab);
}

} // namespace
