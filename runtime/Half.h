//===- Half.h - Bit-exact f16 and bf16 conversions --------------*- C++ -*-===//
//
// Conversions between float/double and the 16-bit float formats, done on bit
// patterns so they do not depend on compiler or CPU support for _Float16.
// Every narrowing rounds to nearest, ties to even, as PyTorch and numpy do.
//
// NaN handling: the payload's top bits are kept (and the result forced to stay
// a NaN), so halfToFloat followed by floatToHalf returns every one of the
// 65536 f16 patterns unchanged, and likewise for bf16. PyTorch canonicalises
// NaNs instead; no numeric result depends on the difference.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_HALF_H
#define STEP_RUNTIME_HALF_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace step::rt {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// IEEE binary16 pattern nearest to f (ties to even); overflow gives +-inf.
inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    if (ax == 0x7f800000u)
      return sign | 0x7c00u;
    // A NaN whose payload lives only in the low 13 bits would truncate to inf.
    uint32_t payload = (ax >> 13) & 0x3ffu;
    return static_cast<uint16_t>(sign | 0x7c00u | (payload ? payload : 1u));
  }
  if (ax >= 0x38800000u) {
    // Normal in f16 (|f| >= 2^-14): rebias the exponent by 127 - 15 = 112 and
    // drop 13 mantissa bits. A carry out of the mantissa bumps the exponent,
    // which is exactly right, and can reach the inf pattern.
    uint32_t q = (ax - (112u << 23)) >> 13;
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
      ++q;
    if (q >= 0x7c00u)
      return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | q);
  }
  // Subnormal (or zero) in f16: the result counts units of 2^-24. A float
  // with exponent field e and 24-bit significand m is m * 2^(e - 150), i.e.
  // m >> (126 - e) units.
  uint32_t e = ax >> 23;
  if (e < 102) // below 2^-25: rounds to zero even at the tie
    return sign;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - e; // 14 .. 24
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u)))
    ++q; // may become 0x400, the smallest normal: still the right pattern
  return static_cast<uint16_t>(sign | q);
}

/// Exact: every f16 value is a float.
inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f)
    return bitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0)
      return bitsToFloat(sign);
    // Normalise the subnormal: each shift lowers the exponent by one.
    int32_t exp = 1;
    while (!(m & 0x400u)) {
      m <<= 1;
      --exp;
    }
    m &= 0x3ffu;
    return bitsToFloat(sign | static_cast<uint32_t>(exp + 112) << 23 |
                       (m << 13));
  }
  return bitsToFloat(sign | ((e + 112) << 23) | (m << 13));
}

/// bfloat16 pattern nearest to f (ties to even); the top half of a float.
inline uint16_t floatToBF16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    uint16_t t = static_cast<uint16_t>(x >> 16);
    return (t & 0x7fu) ? t : static_cast<uint16_t>(t | 0x40u);
  }
  // Adding 0x7fff plus the kept LSB rounds half-way cases to even; a carry
  // into the exponent (including up to inf) is the correct result.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16ToFloat(uint16_t b) {
  return bitsToFloat(static_cast<uint32_t>(b) << 16);
}

/// v rounded to float with round-to-odd: truncate, then set the last bit if
/// anything was lost. Rounding that result to a format with at least two
/// fewer significand bits (f16, bf16) gives the correctly rounded value of v,
/// whereas a plain double->float->f16 chain can round twice.
inline float doubleToFloatRoundOdd(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v || (floatBits(f) & 1u))
    return f;
  // f is the even one of v's two float neighbours: take the other one.
  return std::nextafter(f, static_cast<double>(f) > v ? -INFINITY : INFINITY);
}

/// Correctly rounded double -> f16 / bf16 (ties to even).
inline uint16_t doubleToHalf(double v) {
  return floatToHalf(doubleToFloatRoundOdd(v));
}
inline uint16_t doubleToBF16(double v) {
  return floatToBF16(doubleToFloatRoundOdd(v));
}

} // namespace step::rt

#endif // STEP_RUNTIME_HALF_H
