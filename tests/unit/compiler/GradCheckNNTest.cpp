//===- GradCheckNNTest.cpp - VJPs of the neural-network ops vs FD ---------===//
//
// Every rule of VJPNN.cpp against central finite differences, on shapes
// and attributes drawn from a few seeds: softmax and log_softmax along each
// dim, layer_norm over one and two trailing dims (gradients of x, weight and
// bias), embedding with repeated indices, cross_entropy for every reduction
// with and without ignored rows, dropout, and attention causal or not, with
// and without an explicit scale, Tq != Tk and Dv != D.
//
// Tolerances: the harness's rtol = 2e-3 and atol = 2e-4, with h = 3e-3
// instead of 1e-3 (set in check() below). The difference quotient errs by
// rounding y to f32, ulp(|y|) / 2 per y element over the step 2h: the
// scalar losses here (cross_entropy sum, |y| up to ~15) give 4.8e-7 / 2h,
// which is 2.4e-4 at h = 1e-3 (as large as atol) but 8e-5 at h = 3e-3;
// the truncation error h^2/6 * |f'''| stays below 1e-5 for these smooth ops
// on the domains used (|x| <= 2, layer_norm groups of >= 3 elements with
// variance ~1). Measured worst case over all checks: 0.23 of the tolerance
// (cross_entropy sum), so the margin is a factor of 4; a dropped eps or a
// missing causal mask in a rule fails by far more (checked by mutation).
//
//===----------------------------------------------------------------------===//

#include "GradCheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace step::testing {
namespace {

using rt::DType;
using rt::HostTensor;
using rt::numElements;
using rt::Shape;

const uint64_t kNNSeeds[] = {1, 2, 3, 4};


std::string param(const std::string &name, const std::string &type) {
  return "%" + name + ": " + type + " {step.kind = \"param\", step.name = \"" +
         name + "\"}";
}

std::string input(const std::string &name, const std::string &type) {
  return "%" + name + ": " + type + " {step.kind = \"input\", step.name = \"" +
         name + "\"}";
}

/// func.func @f(args) -> result { body; return %y }.
std::string module(const std::string &args, const std::string &body,
                   const std::string &result) {
  return "func.func @f(" + args + ") -> " + result + " {\n  " + body +
         "\n  return %y : " + result + "\n}\n";
}

/// Runs the check with `seed` and expects every param element checked.
void check(const std::string &text,
           const std::map<std::string, HostTensor> &values, uint64_t seed,
           int64_t expected, GradCheckOptions o = {}) {
  SCOPED_TRACE(text);
  o.seed = seed;
  o.h = 3e-3; // see the file header
  EXPECT_EQ(checkGradients(text, values, o), expected);
}

//===----------------------------------------------------------------------===//
// step.softmax, step.log_softmax
//===----------------------------------------------------------------------===//

class GradCheckSoftmaxLike : public ::testing::TestWithParam<const char *> {};

TEST_P(GradCheckSoftmaxLike, EveryDimOfRandomShapes) {
  for (uint64_t seed : kNNSeeds) {
    Shape shape = randomShape(seed, 1, 3, 5);
    std::string t = tensorType(shape);
    for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " dim " +
                   std::to_string(dim));
      std::string text =
          module(param("x", t),
                 "%y = step." + std::string(GetParam()) +
                     " %x dim = " + std::to_string(dim) + " : " + t,
                 t);
      check(text, {{"x", uniform(shape, seed, -2, 2)}}, seed,
            numElements(shape));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NN, GradCheckSoftmaxLike,
                         ::testing::Values("softmax", "log_softmax"));

//===----------------------------------------------------------------------===//
// step.layer_norm
//===----------------------------------------------------------------------===//

/// layer_norm of a random x whose trailing `normRank` dims (each 3..5, so a
/// group never has a variance near 0) are normalized; x, weight and bias
/// are all params.
void checkLayerNorm(uint64_t seed, int normRank, double eps) {
  Dice dice(seed, 17);
  Shape lead = randomShape(seed, 0, 2, 3);
  Shape norm;
  for (int i = 0; i < normRank; ++i)
    norm.push_back(dice.roll(3, 5));
  Shape shape = lead;
  shape.insert(shape.end(), norm.begin(), norm.end());
  std::string tx = tensorType(shape), tw = tensorType(norm);
  char epsText[32];
  std::snprintf(epsText, sizeof(epsText), "%.6e", eps);
  std::string text =
      module(param("x", tx) + ", " + param("w", tw) + ", " + param("b", tw),
             "%y = step.layer_norm %x, %w, %b eps = " + std::string(epsText) +
                 " : " + tx + ", " + tw + ", " + tw,
             tx);
  SCOPED_TRACE("seed " + std::to_string(seed) + " shape " +
               rt::shapeToString(shape));
  check(text,
        {{"x", uniform(shape, seed, -2, 2)},
         {"w", uniform(norm, seed + 10, 0.5, 1.5)}},
        seed, numElements(shape) + 2 * numElements(norm));
}

TEST(GradCheckNN, LayerNormOverOneTrailingDim) {
  for (uint64_t seed : kNNSeeds)
    checkLayerNorm(seed, 1, 1e-5);
}

TEST(GradCheckNN, LayerNormOverTwoTrailingDims) {
  for (uint64_t seed : kNNSeeds)
    checkLayerNorm(seed, 2, 1e-5);
}

TEST(GradCheckNN, LayerNormWithLargeEps) {
  // eps comparable to the variance: a rule that dropped or misplaced eps
  // in the recomputed rstd would be off by tens of percent.
  for (uint64_t seed : kNNSeeds)
    checkLayerNorm(seed, 1, 0.5);
}

TEST(GradCheckNN, LayerNormWithXAsInput) {
  // Only weight and bias are params: the rule builds no dx.
  Shape shape{3, 4};
  std::string tx = tensorType(shape), tw = tensorType({4});
  std::string text =
      module(input("x", tx) + ", " + param("w", tw) + ", " + param("b", tw),
             "%y = step.layer_norm %x, %w, %b eps = 1.0e-05 : " + tx + ", " +
                 tw + ", " + tw,
             tx);
  check(text, {{"x", uniform(shape, 5, -2, 2)}}, 5, 8);
}

//===----------------------------------------------------------------------===//
// step.embedding
//===----------------------------------------------------------------------===//

TEST(GradCheckNN, EmbeddingWithRepeatedIndices) {
  for (uint64_t seed : kNNSeeds) {
    for (DType indexType : {DType::I64, DType::I32}) {
      Dice dice(seed, 17);
      int64_t v = dice.roll(2, 5), d = dice.roll(1, 4);
      Shape idxShape = randomShape(seed, 1, 2, 4);
      // The last dim alone has V + 1 positions for V rows, so some index
      // repeats (its row accumulates); unused rows get a zero gradient.
      idxShape.push_back(v + 1);
      std::vector<double> idx;
      for (int64_t i = 0; i < numElements(idxShape); ++i)
        idx.push_back(static_cast<double>(dice.roll(0, v - 1)));
      std::string ti =
          tensorType(idxShape, indexType == DType::I64 ? "i64" : "i32");
      std::string tw = tensorType({v, d});
      Shape out = idxShape;
      out.push_back(d);
      std::string text = module(input("i", ti) + ", " + param("w", tw),
                                "%y = step.embedding %i, %w : " + ti + ", " +
                                    tw + " -> " + tensorType(out),
                                tensorType(out));
      // y is linear in the table: the quotient is exact up to rounding y.
      check(text, {{"i", literal(idxShape, idx, indexType)}}, seed, v * d);
    }
  }
}

//===----------------------------------------------------------------------===//
// step.cross_entropy
//===----------------------------------------------------------------------===//

/// cross_entropy of random [N, C] logits. With `withIgnored`, every third
/// row's target is the ignore index: a random class given as ignore_index
/// when `explicitIgnore`, else PyTorch's default -100 (no attribute).
void checkCrossEntropy(uint64_t seed, const std::string &reduction,
                       bool withIgnored, bool explicitIgnore) {
  Dice dice(seed, 17);
  int64_t n = dice.roll(2, 6), c = dice.roll(2, 6);
  int64_t ignoreIndex = explicitIgnore ? dice.roll(0, c - 1) : -100;
  std::vector<double> targets;
  for (int64_t i = 0; i < n; ++i) {
    int64_t t = dice.roll(0, c - 1);
    if (withIgnored && i % 3 == 1)
      t = ignoreIndex;
    else if (explicitIgnore && t == ignoreIndex)
      t = (t + 1) % c; // a class equal to ignore_index would be skipped
    targets.push_back(static_cast<double>(t));
  }
  std::string tl = tensorType({n, c}), tt = tensorType({n}, "i64");
  std::string ty = reduction == "none" ? tensorType({n}) : tensorType({});
  std::string attr =
      explicitIgnore ? " ignore_index = " + std::to_string(ignoreIndex) : "";
  std::string text =
      module(param("x", tl) + ", " + input("t", tt),
             "%y = step.cross_entropy %x, %t reduction = " + reduction + attr +
                 " : " + tl + ", " + tt + " -> " + ty,
             ty);
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + reduction);
  check(text,
        {{"x", uniform({n, c}, seed, -2, 2)},
         {"t", literal({n}, targets, DType::I64)}},
        seed, n * c);
}

class GradCheckCrossEntropy : public ::testing::TestWithParam<const char *> {};

TEST_P(GradCheckCrossEntropy, AllRowsCounted) {
  for (uint64_t seed : kNNSeeds)
    checkCrossEntropy(seed, GetParam(), false, false);
}

TEST_P(GradCheckCrossEntropy, DefaultIgnoreIndexRows) {
  for (uint64_t seed : kNNSeeds)
    checkCrossEntropy(seed, GetParam(), true, false);
}

TEST_P(GradCheckCrossEntropy, ExplicitIgnoreIndexRows) {
  for (uint64_t seed : kNNSeeds)
    checkCrossEntropy(seed, GetParam(), true, true);
}

INSTANTIATE_TEST_SUITE_P(NN, GradCheckCrossEntropy,
                         ::testing::Values("mean", "sum", "none"));

//===----------------------------------------------------------------------===//
// step.dropout
//===----------------------------------------------------------------------===//

TEST(GradCheckNN, DropoutSameMaskOnTheCotangent) {
  for (uint64_t seed : kNNSeeds) {
    Shape shape = randomShape(seed, 1, 3, 6);
    std::string t = tensorType(shape);
    std::string text = module(param("x", t),
                              "%y = step.dropout %x p = 3.0e-01 seed = " +
                                  std::to_string(seed * 977) + " : " + t,
                              t);
    // y is linear in x (0 or x / 0.7 per element): exact up to rounding y.
    check(text, {}, seed, numElements(shape));
  }
}

TEST(GradCheckNN, DropoutGradientIsExactlyTheMaskedCotangent) {
  // The VJP is dropout(w): 0 where dropped, float(w * float(1 / 0.7))
  // where kept, bit for bit as the forward kernel rounds.
  Shape shape{64};
  std::string t = tensorType(shape);
  std::string text = module(
      param("x", t), "%y = step.dropout %x p = 3.0e-01 seed = 5 : " + t, t);
  detail::Gradients g = detail::computeGradients(text, {}, {});
  ASSERT_EQ(g.error, "");
  const HostTensor &gx = g.analytic.at("x");
  float scale = static_cast<float>(1.0 / 0.7);
  int64_t kept = 0;
  for (int64_t i = 0; i < 64; ++i) {
    double got = gx.getAsDouble(i);
    if (got == 0.0)
      continue;
    ++kept;
    EXPECT_EQ(got, static_cast<double>(static_cast<float>(g.w.getAsDouble(i)) *
                                       scale))
        << i;
  }
  // About 70% of 64 kept; the bounds only guard against all or nothing.
  EXPECT_GT(kept, 30);
  EXPECT_LT(kept, 60);
}

//===----------------------------------------------------------------------===//
// step.attention
//===----------------------------------------------------------------------===//

struct AttentionCase {
  const char *name;
  bool causal;
  bool explicitScale;
};

void PrintTo(const AttentionCase &c, std::ostream *os) { *os << c.name; }

class GradCheckAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(GradCheckAttention, RandomShapes) {
  const AttentionCase &c = GetParam();
  for (uint64_t seed : kNNSeeds) {
    Dice dice(seed, 17);
    Shape batch = randomShape(seed, 0, 2, 2);
    int64_t tq = dice.roll(1, 4), tk = dice.roll(1, 4);
    int64_t d = dice.roll(1, 4), dv = dice.roll(1, 4);
    auto with = [&](int64_t a, int64_t b) {
      Shape s = batch;
      s.push_back(a);
      s.push_back(b);
      return s;
    };
    Shape qs = with(tq, d), ks = with(tk, d), vs = with(tk, dv),
          os = with(tq, dv);
    std::string tqT = tensorType(qs), tkT = tensorType(ks),
                tvT = tensorType(vs), toT = tensorType(os);
    std::string attrs = std::string(c.causal ? " causal" : "") +
                        (c.explicitScale ? " scale = 7.5e-01" : "");
    std::string text = module(param("q", tqT) + ", " + param("k", tkT) + ", " +
                                  param("v", tvT),
                              "%y = step.attention %q, %k, %v" + attrs + " : " +
                                  tqT + ", " + tkT + ", " + tvT + " -> " + toT,
                              toT);
    SCOPED_TRACE("seed " + std::to_string(seed) + " q " +
                 rt::shapeToString(qs) + " k " + rt::shapeToString(ks) + " v " +
                 rt::shapeToString(vs));
    check(text,
          {{"q", uniform(qs, seed, -1.5, 1.5)},
           {"k", uniform(ks, seed + 20, -1.5, 1.5)},
           {"v", uniform(vs, seed + 40, -1.5, 1.5)}},
          seed, numElements(qs) + numElements(ks) + numElements(vs));
  }
}

INSTANTIATE_TEST_SUITE_P(
    NN, GradCheckAttention,
    ::testing::Values(AttentionCase{"full", false, false},
                      AttentionCase{"full_scaled", false, true},
                      AttentionCase{"causal", true, false},
                      AttentionCase{"causal_scaled", true, true}),
    [](const ::testing::TestParamInfo<AttentionCase> &info) {
      return std::string(info.param.name);
    });

TEST(GradCheckNN, CausalAttentionWithMoreQueriesThanKeys) {
  // Tq > Tk: the last queries see every key, the first only key 0; the
  // masked scores must get no gradient (k rows beyond i see no query i).
  Shape qs{2, 5, 3}, ks{2, 2, 3};
  std::string tq = tensorType(qs), tk = tensorType(ks);
  std::string text =
      module(param("q", tq) + ", " + param("k", tk) + ", " + param("v", tk),
             "%y = step.attention %q, %k, %v causal : " + tq + ", " + tk +
                 ", " + tk + " -> " + tq,
             tq);
  check(text, {}, 9, numElements(qs) + 2 * numElements(ks));
}

TEST(GradCheckNN, AttentionWithOnlyValueAsParam) {
  // q and k are inputs: the rule builds dV alone (no dP, dS).
  Shape s{3, 4};
  std::string t = tensorType(s);
  std::string text =
      module(input("q", t) + ", " + input("k", t) + ", " + param("v", t),
             "%y = step.attention %q, %k, %v causal : " + t + ", " + t + ", " +
                 t + " -> " + t,
             t);
  check(text, {{"q", uniform(s, 1)}, {"k", uniform(s, 2)}}, 3, numElements(s));
}

//===----------------------------------------------------------------------===//
// Compositions: a transformer block's NN ops chained
//===----------------------------------------------------------------------===//

TEST(GradCheckNN, LayerNormAttentionDropoutChain) {
  // layer_norm -> attention (q = k = v, so three cotangents add) ->
  // dropout -> log_softmax: every NN rule's output feeds another rule.
  Shape s{2, 3, 4};
  std::string t = tensorType(s), tw = tensorType({4});
  std::string body =
      "%h = step.layer_norm %x, %w, %b eps = 1.0e-05 : " + t + ", " + tw +
      ", " + tw + "\n  %a = step.attention %h, %h, %h causal : " + t + ", " +
      t + ", " + t + " -> " + t + "\n  %d = step.dropout %a p = 3.0e-01 " +
      "seed = 11 : " + t + "\n  %y = step.log_softmax %d dim = 2 : " + t;
  std::string text = module(
      param("x", t) + ", " + param("w", tw) + ", " + param("b", tw), body, t);
  for (uint64_t seed : kNNSeeds)
    check(text, {{"x", uniform(s, seed, -2, 2)}}, seed, numElements(s) + 8);
}

} // namespace
} // namespace step::testing
