//===- ElementwiseTest.cpp - unary/binary/compare/select/cast tests -------===//
//
// Expected values are the exact mathematical results (from the definitions
// and standard tables of exp, erf, ...); results in f16/bf16 are compared
// within half an ulp of that dtype (TestUtil.h relTol).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace step::rt;
using namespace step::rt::cpu;
using namespace step::rt::test;

namespace {

const double kNaN = NAN;
const double kE = 2.718281828459045;

struct UnaryCase {
  UnaryOp op;
  std::vector<double> in, out;
};

TEST(Unary, FloatOpsOnEveryFloatDType) {
  const std::vector<UnaryCase> cases = {
      {UnaryOp::Neg, {1.5, -2, 0}, {-1.5, 2, 0}},
      {UnaryOp::Exp, {0, 1, -1, 2, -kInf}, {1, kE, 1 / kE, kE * kE, 0}},
      {UnaryOp::Log,
       {1, 2, 0.5, 0, -1},
       {0, 0.6931471805599453, -0.6931471805599453, -kInf, kNaN}},
      {UnaryOp::Tanh,
       {0, 0.5, -1, 30},
       {0, 0.46211715726000974, -0.7615941559557649, 1}},
      {UnaryOp::Sigmoid,
       {0, 2, -2, 100, kInf, -kInf},
       {0.5, 0.8807970779778823, 0.11920292202211755, 1, 1, 0}},
      {UnaryOp::Relu, {-1, 0, 2.5, kNaN, -kInf}, {0, 0, 2.5, kNaN, 0}},
      // 0.5 x (1 + erf(x / sqrt 2)): Phi(1) = 0.8413447460685429,
      // Phi(2) = 0.9772498680518208.
      {UnaryOp::GeluErf,
       {0, 1, -1, 2},
       {0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416}},
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
      {UnaryOp::GeluTanh,
       {0, 1, -1, 2, 0.5},
       {0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775,
        0.34571400982514394}},
      {UnaryOp::Sqrt, {4, 2, 0, -1}, {2, 1.4142135623730951, 0, kNaN}},
      {UnaryOp::Rsqrt, {4, 0.25, 0, 2}, {0.5, 2, kInf, 0.7071067811865476}},
      {UnaryOp::Abs, {-1.5, 2, -kInf}, {1.5, 2, kInf}},
      {UnaryOp::Erf,
       {0, 0.5, -1, 5},
       {0, 0.5204998778130465, -0.8427007929497149, 1}},
      {UnaryOp::Sin,
       {0, 0.5, -2},
       {0, 0.479425538604203, -0.9092974268256817}},
      {UnaryOp::Cos,
       {0, 0.5, -2},
       {1, 0.8775825618903728, -0.4161468365471424}},
  };
  for (DType t : kFloatTypes)
    for (const UnaryCase &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " op " +
                   std::to_string(static_cast<int>(c.op)));
      Shape s = {static_cast<int64_t>(c.in.size())};
      HostTensor y = unary(c.op, make(t, s, c.in));
      // The inputs are exact in every dtype; 1e-7 absolute covers results
      // near zero such as sin(0) computed in float.
      expectValues(y, t, s, c.out, 1e-7);
    }
}

TEST(Unary, SigmoidIsStableForLargeNegativeInputs) {
  // 1/(1+exp(100)) = exp(-100)/(1+exp(-100)) = 3.72e-44: a float subnormal
  // that the naive 1/(1+exp(-x)) would also give, but exp(-x) overflows past
  // x = -88.7 and the stable form must still produce the tiny value.
  HostTensor y = unary(UnaryOp::Sigmoid, make(DType::F32, {2}, {-100, -95}));
  EXPECT_NEAR(y.getAsDouble(0), 3.720075976020836e-44, 2e-45);
  EXPECT_GT(y.getAsDouble(1), 0.0);
}

TEST(Unary, NegAbsReluOnIntegers) {
  for (DType t : kIntTypes) {
    double mn = t == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
    HostTensor x = make(t, {4}, {3, -4, 0, mn});
    // -MIN and |MIN| wrap to MIN (two's complement), as in torch.
    expectValues(unary(UnaryOp::Neg, x), t, {4}, {-3, 4, 0, mn});
    expectValues(unary(UnaryOp::Abs, x), t, {4}, {3, 4, 0, mn});
    expectValues(unary(UnaryOp::Relu, x), t, {4}, {3, 0, 0, 0});
  }
}

TEST(Unary, RejectsUnsupportedDTypes) {
  EXPECT_ERROR(unary(UnaryOp::Exp, make(DType::I32, {2}, {1, 2})),
               {"step.exp", "f32, f16 or bf16", "i32 [2]"});
  EXPECT_ERROR(unary(UnaryOp::GeluErf, HostTensor(DType::I64, {1})),
               {"step.gelu", "i64 [1]"});
  EXPECT_ERROR(unary(UnaryOp::Neg, HostTensor(DType::I1, {3})),
               {"step.neg", "i1 [3]"});
}

TEST(Unary, RoundsOnceOnStore) {
  // exp(1) = 2.71828...: f16 spacing at 2 is 2^-9, so 1392 * 2^-9 = 2.71875
  // (pattern 0x4170); bf16 spacing is 2^-6: 174 * 2^-6 = 2.71875 (0x402e).
  EXPECT_EQ(bits16(unary(UnaryOp::Exp, make(DType::F16, {1}, {1}))),
            (std::vector<uint16_t>{0x4170}));
  EXPECT_EQ(bits16(unary(UnaryOp::Exp, make(DType::BF16, {1}, {1}))),
            (std::vector<uint16_t>{0x402e}));
}

TEST(Unary, ZeroSizeAndDeterminism) {
  for (DType t : kFloatTypes) {
    HostTensor e = unary(UnaryOp::Tanh, HostTensor(t, {0, 3}));
    EXPECT_EQ(e.shape(), (Shape{0, 3}));
  }
  HostTensor x = make(DType::F32, {3}, {0.3, -1.7, 2.2});
  EXPECT_TRUE(unary(UnaryOp::GeluErf, x)
                  .bitwiseEqual(unary(UnaryOp::GeluErf, x)));
}

// step.gelu_grad: g * gelu'(x), the derivative written out here in double
// (Phi(x) + x phi(x); for tanh, 0.5 (1 + t) + 0.5 x (1 - t^2) u'), apart from
// the kernel's f32 formula. Half types compute in f32 and round once: the
// result is the f32 result rounded to the type.
TEST(Binary, GeluGradIsTheGradientTimesGelusDerivative) {
  const std::vector<double> g = {1, 2, -0.5, 1, 3, -1, 0.25},
                            x = {0, 1, -1, 2, -3, 0.5, 4};
  std::vector<double> erfWant, tanhWant;
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    erfWant.push_back(g[i] * (cdf + v * pdf));
    double beta = std::sqrt(2 / M_PI), k = 0.044715;
    double t = std::tanh(beta * (v + k * v * v * v));
    double du = beta * (1 + 3 * k * v * v);
    tanhWant.push_back(g[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du));
  }
  Shape s = {static_cast<int64_t>(x.size())};
  for (auto [op, want] : {std::pair{BinaryOp::GeluGradErf, erfWant},
                          std::pair{BinaryOp::GeluGradTanh, tanhWant}}) {
    HostTensor f32 = binary(op, make(DType::F32, s, g), make(DType::F32, s, x));
    // f32: a few ulp (tanh, erf and exp of float), and where 1 + erf
    // (1 + tanh) cancels (x = -3, g = 3) an absolute |g| |x| 2^-24 = 5e-7.
    expectValues(f32, DType::F32, s, want, 1e-6);
    for (DType t : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(dtypeName(t));
      HostTensor once(t, s);
      for (int64_t i = 0; i < once.numel(); ++i)
        once.setFromDouble(i, f32.getAsDouble(i));
      EXPECT_TRUE(binary(op, make(t, s, g), make(t, s, x)).bitwiseEqual(once));
    }
  }
  EXPECT_ERROR(binary(BinaryOp::GeluGradTanh, HostTensor(DType::I32, {2}),
                      HostTensor(DType::I32, {2})),
               {"step.gelu_grad", "float type", "i32 [2]"});
  EXPECT_ERROR(binary(BinaryOp::GeluGradErf, HostTensor(DType::F32, {2}),
                      HostTensor(DType::F32, {3})),
               {"step.gelu_grad"});
}

TEST(Binary, FloatArithmetic) {
  const std::vector<double> a = {1.5, -2, 3, 0.5}, b = {0.5, 4, -1.5, 2};
  const std::vector<std::pair<BinaryOp, std::vector<double>>> cases = {
      {BinaryOp::Add, {2, 2, 1.5, 2.5}},    {BinaryOp::Sub, {1, -6, 4.5, -1.5}},
      {BinaryOp::Mul, {0.75, -8, -4.5, 1}}, {BinaryOp::Div, {3, -0.5, -2, 0.25}},
      {BinaryOp::Max, {1.5, 4, 3, 2}},      {BinaryOp::Min, {0.5, -2, -1.5, 0.5}},
  };
  for (DType t : kFloatTypes)
    for (const auto &[op, want] : cases)
      expectValues(binary(op, make(t, {2, 2}, a), make(t, {2, 2}, b)), t,
                   {2, 2}, want);
  for (DType t : kFloatTypes)
    expectValues(binary(BinaryOp::Pow, make(t, {4}, {2, 9, 0.5, -2}),
                        make(t, {4}, {3, 0.5, -1, 2})),
                 t, {4}, {8, 3, 2, 4});
}

TEST(Binary, FloatSpecialValues) {
  HostTensor a = make(DType::F32, {4}, {kNaN, 1, 1, -1});
  HostTensor b = make(DType::F32, {4}, {1, kNaN, 0, 0});
  // torch.maximum/minimum propagate NaN from either side.
  expectValues(binary(BinaryOp::Max, a, b), DType::F32, {4},
               {kNaN, kNaN, 1, 0});
  expectValues(binary(BinaryOp::Min, a, b), DType::F32, {4},
               {kNaN, kNaN, 0, -1});
  expectValues(binary(BinaryOp::Div, a, b), DType::F32, {4},
               {kNaN, kNaN, kInf, -kInf});
}

TEST(Binary, RoundsOnceOnStoreF16BF16) {
  // f16: 1 + 2^-11 is the tie between 1.0 (0x3c00, even) and 0x3c01;
  // (1 + 2^-10) + 2^-11 ties between 0x3c01 and 0x3c02 (even).
  HostTensor a = make(DType::F16, {2}, {1.0, 1.0 + 0x1p-10});
  HostTensor b = make(DType::F16, {2}, {0x1p-11, 0x1p-11});
  EXPECT_EQ(bits16(binary(BinaryOp::Add, a, b)),
            (std::vector<uint16_t>{0x3c00, 0x3c02}));
  // bf16: the same with its 2^-7 spacing at 1.
  HostTensor c = make(DType::BF16, {2}, {1.0, 1.0 + 0x1p-7});
  HostTensor d = make(DType::BF16, {2}, {0x1p-8, 0x1p-8});
  EXPECT_EQ(bits16(binary(BinaryOp::Add, c, d)),
            (std::vector<uint16_t>{0x3f80, 0x3f82}));
  // 65504 * 2 overflows f16 to inf.
  EXPECT_EQ(bits16(binary(BinaryOp::Mul, make(DType::F16, {1}, {65504}),
                          make(DType::F16, {1}, {2}))),
            (std::vector<uint16_t>{0x7c00}));
}

TEST(Binary, IntegerArithmetic) {
  for (DType t : kIntTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor a = make(t, {4}, {7, -7, 7, -7});
    HostTensor b = make(t, {4}, {2, 2, -2, -2});
    expectValues(binary(BinaryOp::Add, a, b), t, {4}, {9, -5, 5, -9});
    expectValues(binary(BinaryOp::Sub, a, b), t, {4}, {5, -9, 9, -5});
    expectValues(binary(BinaryOp::Mul, a, b), t, {4}, {14, -14, -14, 14});
    // Truncation toward zero, not floor.
    expectValues(binary(BinaryOp::Div, a, b), t, {4}, {3, -3, -3, 3});
    expectValues(binary(BinaryOp::Max, a, b), t, {4}, {7, 2, 7, -2});
    expectValues(binary(BinaryOp::Min, a, b), t, {4}, {2, -7, -2, -7});
  }
}

TEST(Binary, IntegerWraparound) {
  const int32_t mx = std::numeric_limits<int32_t>::max();
  const int32_t mn = std::numeric_limits<int32_t>::min();
  HostTensor a = make(DType::I32, {3}, {double(mx), double(mn), 65536});
  HostTensor b = make(DType::I32, {3}, {1, 1, 65536});
  expectValues(binary(BinaryOp::Add, a, b), DType::I32, {3},
               {double(mn), double(mn) + 1, 131072});
  expectValues(binary(BinaryOp::Sub, a, b), DType::I32, {3},
               {double(mx) - 1, double(mx), 0});
  // 2^16 * 2^16 = 2^32 wraps to 0.
  expectValues(binary(BinaryOp::Mul, a, b), DType::I32, {3},
               {double(mx), double(mn), 0});
  // MIN / -1 overflows; the wrapped result is MIN.
  expectValues(binary(BinaryOp::Div, make(DType::I32, {1}, {double(mn)}),
                      make(DType::I32, {1}, {-1})),
               DType::I32, {1}, {double(mn)});
  HostTensor l = make(DType::I64, {1}, {0});
  l.data<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  HostTensor r = binary(BinaryOp::Add, l, make(DType::I64, {1}, {1}));
  EXPECT_EQ(r.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
}

TEST(Binary, Errors) {
  EXPECT_ERROR(binary(BinaryOp::Div, make(DType::I32, {3}, {1, 2, 3}),
                      make(DType::I32, {3}, {1, 0, 1})),
               {"step.div", "division by zero", "element 1"});
  EXPECT_ERROR(binary(BinaryOp::Pow, make(DType::I64, {1}, {2}),
                      make(DType::I64, {1}, {2})),
               {"step.pow", "pow needs a float type", "i64 [1]"});
  EXPECT_ERROR(binary(BinaryOp::Add, HostTensor(DType::F32, {2, 3}),
                      HostTensor(DType::F32, {3, 2})),
               {"step.add", "same dtype and shape", "f32 [2, 3]", "f32 [3, 2]"});
  EXPECT_ERROR(binary(BinaryOp::Mul, HostTensor(DType::F32, {2}),
                      HostTensor(DType::F16, {2})),
               {"step.mul", "f32 [2]", "f16 [2]"});
  EXPECT_ERROR(binary(BinaryOp::Add, HostTensor(DType::I1, {2}),
                      HostTensor(DType::I1, {2})),
               {"step.add", "i1 [2]"});
}

TEST(Compare, AllPredicatesFloatIntBool) {
  struct Case {
    CompareOp op;
    std::vector<double> f, i;
  };
  // Float operands {1, 2, NaN, 3} vs {1, 3, NaN, 2}; NaN compares unequal
  // to everything. Integer operands {1, 2, 5, 3} vs {1, 3, 5, 2}.
  const std::vector<Case> cases = {
      {CompareOp::EQ, {1, 0, 0, 0}, {1, 0, 1, 0}},
      {CompareOp::NE, {0, 1, 1, 1}, {0, 1, 0, 1}},
      {CompareOp::LT, {0, 1, 0, 0}, {0, 1, 0, 0}},
      {CompareOp::LE, {1, 1, 0, 0}, {1, 1, 1, 0}},
      {CompareOp::GT, {0, 0, 0, 1}, {0, 0, 0, 1}},
      {CompareOp::GE, {1, 0, 0, 1}, {1, 0, 1, 1}},
  };
  for (const Case &c : cases) {
    for (DType t : kFloatTypes)
      expectValues(compare(c.op, make(t, {4}, {1, 2, kNaN, 3}),
                           make(t, {4}, {1, 3, kNaN, 2})),
                   DType::I1, {4}, c.f);
    for (DType t : kIntTypes)
      expectValues(compare(c.op, make(t, {2, 2}, {1, 2, 5, 3}),
                           make(t, {2, 2}, {1, 3, 5, 2})),
                   DType::I1, {2, 2}, c.i);
  }
  // i1: {0, 0, 1, 1} vs {0, 1, 0, 1}.
  expectValues(compare(CompareOp::LT, make(DType::I1, {4}, {0, 0, 1, 1}),
                       make(DType::I1, {4}, {0, 1, 0, 1})),
               DType::I1, {4}, {0, 1, 0, 0});
  EXPECT_ERROR(compare(CompareOp::EQ, HostTensor(DType::I32, {2}),
                       HostTensor(DType::I64, {2})),
               {"step.compare", "i32 [2]", "i64 [2]"});
}

TEST(Select, EveryDType) {
  HostTensor pred = make(DType::I1, {3}, {1, 0, 1});
  for (DType t : kAllTypes) {
    HostTensor a = makeMovable(t, {3}, {1, 2, 3});
    HostTensor b = makeMovable(t, {3}, {4, 5, 6});
    expectValues(select(pred, a, b), t, {3}, movable(t, {1, 5, 3}));
  }
  EXPECT_ERROR(select(make(DType::I32, {3}, {1, 0, 1}),
                      HostTensor(DType::F32, {3}), HostTensor(DType::F32, {3})),
               {"step.select", "predicate must be i1", "i32 [3]"});
  EXPECT_ERROR(select(HostTensor(DType::I1, {2}), HostTensor(DType::F32, {3}),
                      HostTensor(DType::F32, {3})),
               {"step.select", "i1 [2]"});
  EXPECT_ERROR(select(HostTensor(DType::I1, {3}), HostTensor(DType::F32, {3}),
                      HostTensor(DType::F16, {3})),
               {"step.select", "f32 [3]", "f16 [3]"});
}

TEST(Cast, FloatToInteger) {
  const std::vector<double> in = {2.7, -2.7, kNaN, 1e10, -1e10, kInf, -kInf};
  // Truncate toward zero; NaN -> 0; out of range saturates.
  expectValues(cast(make(DType::F32, {7}, in), DType::I32), DType::I32, {7},
               {2, -2, 0, 2147483647.0, -2147483648.0, 2147483647.0,
                -2147483648.0});
  HostTensor l = cast(make(DType::F32, {4}, {1e19, -1e19, 0x1p40, -3.5}),
                      DType::I64);
  EXPECT_EQ(l.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(l.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(l.data<int64_t>()[2], int64_t(1) << 40);
  EXPECT_EQ(l.data<int64_t>()[3], -3);
  for (DType t : {DType::F16, DType::BF16})
    expectValues(cast(make(t, {3}, {2.5, -0.5, 100}), DType::I32), DType::I32,
                 {3}, {2, 0, 100});
}

TEST(Cast, ToAndFromBool) {
  for (DType t : kFloatTypes)
    expectValues(cast(make(t, {4}, {0, -0.0, 0.5, kNaN}), DType::I1),
                 DType::I1, {4}, {0, 0, 1, 1});
  for (DType t : kIntTypes)
    expectValues(cast(make(t, {3}, {0, -3, 1}), DType::I1), DType::I1, {3},
                 {0, 1, 1});
  for (DType t : kAllTypes)
    expectValues(cast(make(DType::I1, {2}, {0, 1}), t), t, {2}, {0, 1});
}

TEST(Cast, IntegerToFloatRoundsOnce) {
  // f16: 2049 ties between 2048 (even) and 2050; 2051 between 2050 and 2052
  // (even); 65520 ties between 65504 and the overflow to inf.
  expectExact(cast(make(DType::I32, {5}, {2049, 2051, 65504, 65520, -3}),
                    DType::F16),
               DType::F16, {5}, {2048, 2052, 65504, kInf, -3});
  // bf16 keeps 8 significant bits: 257 ties to 256, 259 to 260.
  expectExact(cast(make(DType::I64, {2}, {257, 259}), DType::BF16),
               DType::BF16, {2}, {256, 260});
  // As PyTorch, integers reach f16/bf16 through float: 2^24 + 2^16 + 1 first
  // becomes the float 2^24 + 2^16 (nearest float), which is a bf16 tie
  // between 2^24 and 2^24 + 2^17 and rounds to even, 2^24. (Rounding once
  // from the integer would give 2^24 + 2^17.)
  expectExact(cast(make(DType::I32, {1}, {16842753}), DType::BF16),
               DType::BF16, {1}, {16777216});
  // f32 from i64: nearest float, 2^53 + 1 -> 2^53.
  HostTensor big(DType::I64, {1});
  big.data<int64_t>()[0] = (int64_t(1) << 53) + 1;
  EXPECT_EQ(cast(big, DType::F32).data<float>()[0], 0x1p53f);
}

TEST(Cast, FloatToFloat) {
  EXPECT_EQ(bits16(cast(make(DType::F32, {2}, {0.1, 1e6}), DType::F16)),
            (std::vector<uint16_t>{0x2e66, 0x7c00}));
  EXPECT_EQ(bits16(cast(make(DType::F32, {1}, {1.0 / 3}), DType::BF16)),
            (std::vector<uint16_t>{0x3eab}));
  // f16 0x3555 = 1365/4096 = float 0x3eaaa000; the dropped 0xa000 > 0x8000.
  HostTensor h(DType::F16, {1});
  h.data<uint16_t>()[0] = 0x3555;
  EXPECT_EQ(bits16(cast(h, DType::BF16)), (std::vector<uint16_t>{0x3eab}));
  // bf16 0x3f81 = 1 + 2^-7, exact in f16: 0x3c00 + (2^-7 / 2^-10 = 8).
  HostTensor b(DType::BF16, {1});
  b.data<uint16_t>()[0] = 0x3f81;
  EXPECT_EQ(bits16(cast(b, DType::F16)), (std::vector<uint16_t>{0x3c08}));
  EXPECT_EQ(cast(h, DType::F32).data<float>()[0], 0.333251953125f);
}

TEST(Cast, IntegerToInteger) {
  HostTensor l(DType::I64, {3});
  l.data<int64_t>()[0] = (int64_t(1) << 32) + 5;
  l.data<int64_t>()[1] = -1;
  l.data<int64_t>()[2] = int64_t(1) << 31;
  // Keeps the low 32 bits.
  expectValues(cast(l, DType::I32), DType::I32, {3}, {5, -1, -2147483648.0});
  expectValues(cast(make(DType::I32, {2}, {-7, 9}), DType::I64), DType::I64,
               {2}, {-7, 9});
}

TEST(Cast, SameDTypeCopiesAndZeroSize) {
  for (DType t : kAllTypes) {
    HostTensor x = makeMovable(t, {2}, {1, 0});
    EXPECT_TRUE(cast(x, t).bitwiseEqual(x));
    EXPECT_EQ(cast(HostTensor(t, {0}), DType::F16).shape(), (Shape{0}));
  }
}

} // namespace
