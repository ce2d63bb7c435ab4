//===- GradCheckElementwiseTest.cpp - VJPs of elementwise ops vs FD -------===//
//
// The harness itself first (a known gradient, a perturbed one, a kink), then
// every rule of VJPElementwise.cpp against central finite differences on
// random shapes and seeds, with inputs kept away from kinks; the PyTorch
// conventions at kinks and ties are checked separately by exact values.
//
// Tolerances: unless a test says otherwise the harness defaults (h = 1e-3,
// rtol = 2e-3, atol = 2e-4). One param element moves one y element, so the
// difference quotient errs by rounding that y to f32, ulp(y) / 2h (3e-5 of
// |y|), plus truncation h^2/6 * |f'''| (below 1e-4 on the domains used).
// Relative to the derivative the rounding term is largest where y is large
// and flat (sigmoid and gelu near saturation), which atol covers. Every
// check at the defaults also passes with both tolerances 3x tighter.
//
//===----------------------------------------------------------------------===//

#include "GradCheck.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>

namespace step::testing {
namespace {

using rt::DType;
using rt::HostTensor;
using rt::Shape;

/// @f(x) = op(x); `attrs` go after the operand (`approximate tanh`).
std::string unaryModule(const std::string &op, const Shape &shape,
                        const std::string &attrs = "") {
  std::string t = tensorType(shape);
  return "func.func @f(%x: " + t +
         " {step.kind = \"param\", step.name = \"x\"}) -> " + t +
         " {\n  %y = step." + op + " %x" + (attrs.empty() ? "" : " " + attrs) +
         " : " + t + "\n  return %y : " + t + "\n}\n";
}

/// @f(a, b) = op(a, b) with both operands params.
std::string binaryModule(const std::string &op, const Shape &shape) {
  std::string t = tensorType(shape);
  return "func.func @f(%a: " + t +
         " {step.kind = \"param\", step.name = \"a\"}, %b: " + t +
         " {step.kind = \"param\", step.name = \"b\"}) -> " + t +
         " {\n  %y = step." + op + " %a, %b : " + t + "\n  return %y : " + t +
         "\n}\n";
}

/// The analytic gradients of @f, which must compute; the harness draws w.
detail::Gradients analyticOf(const std::string &text,
                             const std::map<std::string, HostTensor> &values) {
  detail::Gradients g = detail::computeGradients(text, values, {});
  EXPECT_EQ(g.error, "");
  return g;
}

/// Expects grad[j] == float(w[j] * factor[j]) exactly: the rules multiply
/// the cotangent w by 0, +-1 or 0.5, which f32 does without rounding.
void expectScaledW(const detail::Gradients &g, const std::string &param,
                   const std::vector<double> &factor) {
  auto it = g.analytic.find(param);
  ASSERT_NE(it, g.analytic.end()) << param;
  ASSERT_EQ(it->second.numel(), static_cast<int64_t>(factor.size()));
  for (size_t j = 0; j < factor.size(); ++j)
    EXPECT_EQ(it->second.getAsDouble(j),
              static_cast<double>(static_cast<float>(g.w.getAsDouble(j) *
                                                     factor[j])))
        << param << " element " << j;
}

//===----------------------------------------------------------------------===//
// The harness
//===----------------------------------------------------------------------===//

const char *kMul = R"mlir(
func.func @f(%a: tensor<2x3xf32> {step.kind = "param", step.name = "a"},
             %b: tensor<2x3xf32> {step.kind = "input", step.name = "b"}) -> tensor<2x3xf32> {
  %y = step.mul %a, %b : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
})mlir";

TEST(GradCheckHarness, MulGradientIsWTimesTheOtherOperand) {
  HostTensor b = uniform({2, 3}, 7);
  detail::Gradients g = analyticOf(kMul, {{"b", b}});
  ASSERT_EQ(g.params, std::vector<std::string>{"a"});
  const HostTensor &ga = g.analytic.at("a");
  for (int64_t j = 0; j < 6; ++j) {
    float expected = static_cast<float>(g.w.getAsDouble(j)) *
                     static_cast<float>(b.getAsDouble(j));
    // The cotangent of y is w exactly, so the rule's one f32 product is
    // the whole analytic error: bit equality.
    EXPECT_EQ(ga.getAsDouble(j), static_cast<double>(expected)) << j;
    // y is linear in a: the difference quotient is exact up to rounding y
    // to f32 (ulp 6e-8 / 2h = 3e-5 relative).
    EXPECT_NEAR(g.numeric.at("a")[j], expected, 1e-4) << j;
  }
  EXPECT_EQ(checkGradients(kMul, {{"b", b}}), 6);
}

TEST(GradCheckHarness, PerturbedGradientIsReported) {
  detail::Gradients g = analyticOf(kMul, {{"b", uniform({2, 3}, 7)}});
  EXPECT_TRUE(detail::compareGradients(g, {}).empty());
  HostTensor &ga = g.analytic.at("a");
  ga.setFromDouble(4, ga.getAsDouble(4) + 0.01);
  std::vector<detail::Mismatch> m = detail::compareGradients(g, {});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].param, "a");
  EXPECT_EQ(m[0].index, 4);
  std::string text = detail::describe(m[0], {2, 3});
  EXPECT_NE(text.find("param 'a' element 4 [1, 1]: analytic "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" vs numeric "), std::string::npos) << text;
}

TEST(GradCheckHarness, ToleranceIsAbsolutePlusRelative) {
  GradCheckOptions o;
  o.atol = 1e-3;
  o.rtol = 1e-2;
  EXPECT_TRUE(detail::withinTolerance(1.0 + 0.0109, 1.0, o));
  EXPECT_FALSE(detail::withinTolerance(1.0 + 0.0111, 1.0, o));
  EXPECT_TRUE(detail::withinTolerance(0.0, 9e-4, o));
  EXPECT_FALSE(detail::withinTolerance(NAN, 1.0, o));
  EXPECT_FALSE(detail::withinTolerance(1.0, NAN, o));
}

TEST(GradCheckHarness, KinkIsReportedAsAMismatch) {
  // relu at 0: PyTorch's gradient is 0, the central difference w / 2.
  EXPECT_NONFATAL_FAILURE(
      checkGradients(unaryModule("relu", {1}), {{"x", literal({1}, {0.0})}}),
      "param 'x' element 0 [0]: analytic 0 vs numeric");
}

TEST(GradCheckHarness, MissingInputIsReported) {
  EXPECT_NONFATAL_FAILURE(checkGradients(kMul), "input 'b' has no value");
}

TEST(GradCheckHarness, DrawsDependOnlyOnTheSeed) {
  GradCheckOptions one, two;
  two.seed = 1;
  std::string text = unaryModule("exp", {4});
  auto a = detail::computeGradients(text, {}, one).analytic.at("x");
  auto b = detail::computeGradients(text, {}, one).analytic.at("x");
  auto c = detail::computeGradients(text, {}, two).analytic.at("x");
  EXPECT_TRUE(a.bitwiseEqual(b));
  EXPECT_FALSE(a.bitwiseEqual(c));
}

//===----------------------------------------------------------------------===//
// Unary ops on random shapes
//===----------------------------------------------------------------------===//

/// Where a unary op is checked: x uniform in [lo, hi), or with |x| in
/// [lo, hi) and random signs when `awayFromZero`.
struct UnaryCase {
  const char *name, *op, *attrs;
  double lo, hi;
  bool awayFromZero;
};

void PrintTo(const UnaryCase &c, std::ostream *os) { *os << c.name; }

class GradCheckUnary : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(GradCheckUnary, MatchesFiniteDifferences) {
  const UnaryCase &c = GetParam();
  for (uint64_t seed : kSeeds) {
    Shape shape = randomShape(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + " shape " +
                 rt::shapeToString(shape));
    HostTensor x = c.awayFromZero ? awayFromZero(shape, seed, c.lo, c.hi)
                                  : uniform(shape, seed, c.lo, c.hi);
    GradCheckOptions o;
    o.seed = seed;
    EXPECT_EQ(checkGradients(unaryModule(c.op, shape, c.attrs), {{"x", x}}, o),
              x.numel());
  }
}

// Domains: relu and abs stay 0.05 from their kink (h = 1e-3 never crosses
// it); log, sqrt and rsqrt stay positive and away from their pole at 0.
INSTANTIATE_TEST_SUITE_P(
    Elementwise, GradCheckUnary,
    ::testing::Values(UnaryCase{"neg", "neg", "", -1, 1, false},
                      UnaryCase{"abs", "abs", "", 0.05, 2, true},
                      UnaryCase{"relu", "relu", "", 0.05, 2, true},
                      UnaryCase{"exp", "exp", "", -2, 2, false},
                      UnaryCase{"log", "log", "", 0.2, 3, false},
                      UnaryCase{"tanh", "tanh", "", -3, 3, false},
                      UnaryCase{"sigmoid", "sigmoid", "", -4, 4, false},
                      UnaryCase{"sqrt", "sqrt", "", 0.2, 3, false},
                      UnaryCase{"rsqrt", "rsqrt", "", 0.2, 3, false},
                      UnaryCase{"erf", "erf", "", -2, 2, false},
                      UnaryCase{"sin", "sin", "", -3, 3, false},
                      UnaryCase{"cos", "cos", "", -3, 3, false},
                      UnaryCase{"gelu_none", "gelu", "approximate none", -3, 3,
                                false},
                      UnaryCase{"gelu_tanh", "gelu", "approximate tanh", -3, 3,
                                false}),
    [](const ::testing::TestParamInfo<UnaryCase> &info) {
      return std::string(info.param.name);
    });

//===----------------------------------------------------------------------===//
// Binary ops on random shapes
//===----------------------------------------------------------------------===//

/// Operands for `op` on `shape`: b away from 0 for div; for max/min,
/// |a - b| >= 0.05 so no tie is within h; a positive base for pow.
std::map<std::string, HostTensor> binaryOperands(const std::string &op,
                                                 const Shape &shape,
                                                 uint64_t seed) {
  HostTensor a = uniform(shape, seed), b = uniform(shape, seed + 100);
  if (op == "div")
    b = awayFromZero(shape, seed + 100, 0.5, 2);
  if (op == "max" || op == "min") {
    HostTensor gap = awayFromZero(shape, seed + 200, 0.05, 1);
    for (int64_t i = 0; i < b.numel(); ++i)
      b.setFromDouble(i, a.getAsDouble(i) + gap.getAsDouble(i));
  }
  if (op == "pow") {
    a = uniform(shape, seed, 0.5, 2);
    b = uniform(shape, seed + 100, -2, 2);
  }
  return {{"a", a}, {"b", b}};
}

class GradCheckBinary : public ::testing::TestWithParam<const char *> {};

TEST_P(GradCheckBinary, MatchesFiniteDifferences) {
  std::string op = GetParam();
  for (uint64_t seed : kSeeds) {
    Shape shape = randomShape(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + " shape " +
                 rt::shapeToString(shape));
    GradCheckOptions o;
    o.seed = seed;
    EXPECT_EQ(checkGradients(binaryModule(op, shape),
                             binaryOperands(op, shape, seed), o),
              2 * rt::numElements(shape));
  }
}

INSTANTIATE_TEST_SUITE_P(Elementwise, GradCheckBinary,
                         ::testing::Values("add", "sub", "mul", "div", "max",
                                           "min", "pow"));

// step.gelu_grad (the second-order rule): both operands, x over [-3, 3]
// where gelu' bends most.
TEST(GradCheckElementwise, GeluGrad) {
  for (const char *approx : {"none", "tanh"})
    for (uint64_t seed : kSeeds) {
      Shape shape = randomShape(seed);
      std::string t = tensorType(shape);
      SCOPED_TRACE(std::string(approx) + " seed " + std::to_string(seed));
      std::string text =
          "func.func @f(%g: " + t +
          " {step.kind = \"param\", step.name = \"g\"}, %x: " + t +
          " {step.kind = \"param\", step.name = \"x\"}) -> " + t +
          " {\n  %y = step.gelu_grad %g, %x approximate " + approx + " : " + t +
          "\n  return %y : " + t + "\n}\n";
      GradCheckOptions o;
      o.seed = seed;
      EXPECT_EQ(checkGradients(text,
                               {{"g", uniform(shape, seed)},
                                {"x", uniform(shape, seed + 100, -3, 3)}},
                               o),
                2 * rt::numElements(shape));
    }
}

TEST(GradCheckElementwise, SameParamInBothOperands) {
  // y = x * x and x / x: the two cotangents are summed.
  for (const char *op : {"mul", "div", "pow"}) {
    SCOPED_TRACE(op);
    std::string text = std::string(R"mlir(
func.func @f(%x: tensor<5xf32> {step.kind = "param", step.name = "x"}) -> tensor<5xf32> {
  %y = step.)mlir") + op + R"mlir( %x, %x : tensor<5xf32>
  return %y : tensor<5xf32>
})mlir";
    EXPECT_EQ(checkGradients(text, {{"x", uniform({5}, 4, 0.5, 2)}}), 5);
  }
}

//===----------------------------------------------------------------------===//
// step.select, step.cast
//===----------------------------------------------------------------------===//

TEST(GradCheckElementwise, Select) {
  for (uint64_t seed : kSeeds) {
    Shape shape = randomShape(seed);
    std::string t = tensorType(shape), p = tensorType(shape, "i1");
    std::string text = "func.func @f(%p: " + p +
                       " {step.kind = \"input\", step.name = \"p\"}, %a: " + t +
                       " {step.kind = \"param\", step.name = \"a\"}, %b: " + t +
                       " {step.kind = \"param\", step.name = \"b\"}) -> " + t +
                       " {\n  %y = step.select %p, %a, %b : " + p + ", " + t +
                       "\n  return %y : " + t + "\n}\n";
    HostTensor coin = uniform(shape, seed + 300), pred(DType::I1, shape);
    for (int64_t i = 0; i < pred.numel(); ++i)
      pred.setFromDouble(i, coin.getAsDouble(i) > 0);
    GradCheckOptions o;
    o.seed = seed;
    EXPECT_EQ(checkGradients(text, {{"p", pred}}, o), 2 * pred.numel());
  }
}

/// x -> `low` -> f32. x and x +- h lie on a 2^-8 grid that f16 and bf16
/// hold exactly, so the difference quotient is w itself; the analytic
/// gradient is w rounded to `low` (the cotangent cast back), off by half an
/// ulp: 2^-11 relative for f16, 2^-9 for bf16 -- hence rtol of twice that.
void checkCastRoundTrip(const std::string &low, double rtol) {
  std::string text = R"mlir(
func.func @f(%x: tensor<3x4xf32> {step.kind = "param", step.name = "x"}) -> tensor<3x4xf32> {
  %l = step.cast %x : tensor<3x4xf32> -> tensor<3x4x)mlir" + low + R"mlir(>
  %y = step.cast %l : tensor<3x4x)mlir" + low + R"mlir(> -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
})mlir";
  HostTensor x = uniform({3, 4}, 5, -0.9, 0.9);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, std::round(x.getAsDouble(i) * 256) / 256);
  GradCheckOptions o;
  o.h = 1.0 / 256;
  o.rtol = rtol;
  o.atol = 0;
  EXPECT_EQ(checkGradients(text, {{"x", x}}, o), 12);
}

TEST(GradCheckElementwise, CastF32ToF16AndBack) { checkCastRoundTrip("f16", 1e-3); }
TEST(GradCheckElementwise, CastF32ToBF16AndBack) { checkCastRoundTrip("bf16", 4e-3); }

TEST(GradCheckElementwise, CastThroughIntegersCarriesNoGradient) {
  // y = x * float(int(x)): only the direct use of x has a gradient, int(x)
  // is piecewise constant (x stays 0.1 from integers, beyond h).
  std::string text = R"mlir(
func.func @f(%x: tensor<6xf32> {step.kind = "param", step.name = "x"}) -> tensor<6xf32> {
  %i = step.cast %x : tensor<6xf32> -> tensor<6xi32>
  %c = step.cast %i : tensor<6xi32> -> tensor<6xf32>
  %y = step.mul %x, %c : tensor<6xf32>
  return %y : tensor<6xf32>
})mlir";
  HostTensor x = literal({6}, {-2.5, -1.2, 0.3, 1.1, 2.9, 3.4});
  EXPECT_EQ(checkGradients(text, {{"x", x}}), 6);
  // Exactly w * int(x): nothing flowed through the casts.
  expectScaledW(analyticOf(text, {{"x", x}}), "x", {-2, -1, 0, 1, 2, 3});
}

//===----------------------------------------------------------------------===//
// PyTorch's conventions at kinks and ties (exact values)
//===----------------------------------------------------------------------===//

TEST(GradCheckElementwise, ReluAndAbsAtZero) {
  HostTensor x = literal({5}, {0.0, -0.0, 1.5, -1.5, 0.25});
  // threshold_backward: 0 where relu(x) <= 0.
  expectScaledW(analyticOf(unaryModule("relu", {5}), {{"x", x}}), "x",
                {0, 0, 1, 0, 1});
  // grad * sgn(x), sgn(+-0) = 0.
  expectScaledW(analyticOf(unaryModule("abs", {5}), {{"x", x}}), "x",
                {0, 0, 1, -1, 1});
}

TEST(GradCheckElementwise, MaxMinSplitTiesHalfAndHalf) {
  std::map<std::string, HostTensor> v = {
      {"a", literal({5}, {1, 2, 3, 0, -0.0})},
      {"b", literal({5}, {1, 1, 4, 0, 0.0})}};
  detail::Gradients max = analyticOf(binaryModule("max", {5}), v);
  expectScaledW(max, "a", {0.5, 1, 0, 0.5, 0.5});
  expectScaledW(max, "b", {0.5, 0, 1, 0.5, 0.5});
  detail::Gradients min = analyticOf(binaryModule("min", {5}), v);
  expectScaledW(min, "a", {0.5, 0, 1, 0.5, 0.5});
  expectScaledW(min, "b", {0.5, 1, 0, 0.5, 0.5});
}

TEST(GradCheckElementwise, PowMasksAtZero) {
  // pow_backward_self: 0 where the exponent is 0, even at base 0 (where
  // e * x^(e-1) would be 0 * inf); pow_backward_exponent: 0 where the base
  // is 0 and the exponent >= 0 (where y * log(x) would be 0 * -inf).
  std::map<std::string, HostTensor> v = {
      {"a", literal({4}, {0, 0, 0, 2})}, {"b", literal({4}, {0, 2, 3, 0})}};
  detail::Gradients g = analyticOf(binaryModule("pow", {4}), v);
  expectScaledW(g, "a", {0, 0, 0, 0});
  const HostTensor &gb = g.analytic.at("b");
  EXPECT_EQ(gb.getAsDouble(0), 0.0);
  EXPECT_EQ(gb.getAsDouble(1), 0.0);
  EXPECT_EQ(gb.getAsDouble(2), 0.0);
  // 2^0 * log(2) * w, rounded in f32 twice (log, then the product).
  float expected = static_cast<float>(g.w.getAsDouble(3)) *
                   std::log(2.0f);
  EXPECT_NEAR(gb.getAsDouble(3), expected, 1e-7);
  // A negative exponent at base 0 is not masked: y * log(0) = inf * -inf.
  v["b"] = literal({4}, {-1, 2, 3, 0});
  double w0 = analyticOf(binaryModule("pow", {4}), v).w.getAsDouble(0);
  EXPECT_EQ(analyticOf(binaryModule("pow", {4}), v).analytic.at("b").getAsDouble(0),
            w0 > 0 ? -INFINITY : INFINITY);
}

} // namespace
} // namespace step::testing
