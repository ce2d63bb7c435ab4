//===- TestUtil.h - Helpers for the runtime unit tests ----------*- C++ -*-===//
//
// Building tensors from literal values and comparing results against values
// worked out from the math, with tolerances that follow from each dtype's
// rounding.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_RUNTIME_TESTUTIL_H
#define STEP_TESTS_UNIT_RUNTIME_TESTUTIL_H

#include "runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace step::rt::test {

inline const std::vector<DType> kFloatTypes = {DType::F32, DType::F16,
                                               DType::BF16};
inline const std::vector<DType> kIntTypes = {DType::I32, DType::I64};
constexpr auto F32 = DType::F32;
constexpr auto I64 = DType::I64;
inline const double kInf = std::numeric_limits<double>::infinity();
/// softmax([1, 2, 3]).
inline const std::vector<double> kSm = {
    0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
inline const std::vector<DType> kAllTypes = {DType::F32, DType::F16,
                                             DType::BF16, DType::I32,
                                             DType::I64, DType::I1};

/// A tensor holding `values` converted as setFromDouble does. For i1, data
/// movement tests pass small integers; they are stored as v % 2 so patterns
/// stay distinguishable (see `movable`).
inline HostTensor make(DType t, const Shape &shape,
                       const std::vector<double> &values) {
  HostTensor x(t, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), x.numel())
      << "test bug: value count does not match " << shapeToString(shape);
  for (int64_t i = 0; i < x.numel() && i < (int64_t)values.size(); ++i)
    x.setFromDouble(i, values[i]);
  return x;
}

/// Small integers as they survive a round trip through dtype t: unchanged for
/// every dtype but i1, which keeps v % 2.
inline std::vector<double> movable(DType t, std::vector<double> v) {
  if (t == DType::I1)
    for (double &x : v)
      x = std::fmod(x, 2.0);
  return v;
}
inline HostTensor makeMovable(DType t, const Shape &shape,
                              const std::vector<double> &values) {
  return make(t, shape, movable(t, values));
}

inline std::vector<double> values(const HostTensor &t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.getAsDouble(i);
  return v;
}

/// Relative error bound for a value computed in float and rounded once to t:
/// half an ulp of t, plus slack for float's own rounding in the computation.
inline double relTol(DType t) {
  switch (t) {
  case DType::F16:
    return 0x1p-11 * 1.01 + 1e-6;
  case DType::BF16:
    return 0x1p-8 * 1.01 + 1e-6;
  default:
    return 1e-6;
  }
}

/// Checks shape, dtype and every element: NaN matches NaN, infinities match
/// exactly, finite values within relTol(dtype) * |expected| + absTol.
inline void expectValues(const HostTensor &t, DType dtype, const Shape &shape,
                         const std::vector<double> &expected,
                         double absTol = 0.0) {
  ASSERT_EQ(t.dtype(), dtype) << "got " << dtypeName(t.dtype());
  ASSERT_EQ(t.shape(), shape) << "got " << shapeToString(t.shape());
  ASSERT_EQ(static_cast<int64_t>(expected.size()), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double got = t.getAsDouble(i), want = expected[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << " of "
                                   << dtypeName(dtype) << ": got " << got;
    } else if (std::isinf(want) || !isFloat(dtype)) {
      EXPECT_EQ(got, want) << "element " << i << " of " << dtypeName(dtype);
    } else {
      EXPECT_NEAR(got, want, relTol(dtype) * std::fabs(want) + absTol)
          << "element " << i << " of " << dtypeName(dtype);
    }
  }
}

/// Like expectValues but every element must equal `expected` exactly: for
/// results whose rounding is the point of the test.
inline void expectExact(const HostTensor &t, DType dtype, const Shape &shape,
                        const std::vector<double> &expected) {
  ASSERT_EQ(t.dtype(), dtype) << "got " << dtypeName(t.dtype());
  ASSERT_EQ(t.shape(), shape) << "got " << shapeToString(t.shape());
  ASSERT_EQ(static_cast<int64_t>(expected.size()), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double got = t.getAsDouble(i), want = expected[i];
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << "element " << i << ": got " << got;
    else
      EXPECT_EQ(got, want) << "element " << i << " of " << dtypeName(dtype);
  }
}

/// The 16-bit patterns of an f16/bf16 tensor.
inline std::vector<uint16_t> bits16(const HostTensor &t) {
  const uint16_t *p = t.data<uint16_t>();
  return std::vector<uint16_t>(p, p + t.numel());
}

} // namespace step::rt::test

/// Expects `stmt` to throw rt::Error whose message contains every string in
/// the braced list.
#define EXPECT_ERROR(stmt, ...)                                                \
  do {                                                                         \
    try {                                                                      \
      stmt;                                                                    \
      ADD_FAILURE() << "expected rt::Error from: " #stmt;                      \
    } catch (const ::step::rt::Error &e) {                                     \
      std::string msg_ = e.what();                                             \
      for (const char *part_ : std::initializer_list<const char *>__VA_ARGS__) \
        EXPECT_NE(msg_.find(part_), std::string::npos)                         \
            << "message \"" << msg_ << "\" lacks \"" << part_ << "\"";         \
    }                                                                          \
  } while (0)

#endif // STEP_TESTS_UNIT_RUNTIME_TESTUTIL_H
