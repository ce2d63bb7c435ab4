//===- GradCheckShapeTest.cpp - VJPs of shape ops, reductions, matmul -----===//
//
// Every rule of VJPShape.cpp against central finite differences, on shapes
// and attributes drawn from a few seeds, plus reduce_max's tie convention
// (torch.amax splits the gradient evenly) by exact values.
//
// Tolerances: the harness defaults (h = 1e-3, rtol = 2e-3, atol = 2e-4).
// Shape ops and sums are linear and reduce_max is linear in the region
// checked, so the difference quotient errs only by rounding y to f32: about
// 3e-5 relative per y element a param element moves (one for shape ops, a
// row of at most 5 for matmul). Every check also passes with both
// tolerances 3x tighter.
//
//===----------------------------------------------------------------------===//

#include "GradCheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace step::testing {
namespace {

using rt::HostTensor;
using rt::Shape;


std::string list(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// @f(x: in) -> out { %y = step.<op> %x <attrs> : in -> out }.
std::string unaryShapeModule(const std::string &op, const std::string &attrs,
                             const Shape &in, const Shape &out) {
  std::string ti = tensorType(in), to = tensorType(out);
  return "func.func @f(%x: " + ti +
         " {step.kind = \"param\", step.name = \"x\"}) -> " + to +
         " {\n  %y = step." + op + " %x" + attrs + " : " + ti + " -> " + to +
         "\n  return %y : " + to + "\n}\n";
}

/// Checks a one-op module on x drawn from `seed` (or `x` when given).
void check(const std::string &text, uint64_t seed, int64_t expected,
           const HostTensor *x = nullptr) {
  SCOPED_TRACE(text);
  GradCheckOptions o;
  o.seed = seed;
  std::map<std::string, HostTensor> values;
  if (x)
    values["x"] = *x;
  EXPECT_EQ(checkGradients(text, values, o), expected);
}

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim, step.reshape, step.transpose
//===----------------------------------------------------------------------===//

TEST(GradCheckShape, BroadcastInDim) {
  for (uint64_t seed : kSeeds) {
    Dice dice(seed, 11);
    Shape out = randomShape(seed, 1, 4, 4);
    // Keep each result dim with probability 1/2; a kept dim is 1 (repeated)
    // with probability 1/3.
    Shape in;
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d)
      if (dice.roll(0, 1)) {
        dims.push_back(d);
        in.push_back(dice.roll(0, 2) == 0 ? 1 : out[d]);
      }
    check(unaryShapeModule("broadcast_in_dim", ", dims = " + list(dims), in,
                           out),
          seed, rt::numElements(in));
  }
}

TEST(GradCheckShape, Reshape) {
  for (uint64_t seed : kSeeds) {
    Shape in = randomShape(seed, 1, 3, 4);
    Shape reversed(in.rbegin(), in.rend()), flat{rt::numElements(in)};
    check(unaryShapeModule("reshape", "", in, reversed), seed,
          rt::numElements(in));
    check(unaryShapeModule("reshape", "", in, flat), seed,
          rt::numElements(in));
  }
}

TEST(GradCheckShape, Transpose) {
  for (uint64_t seed : kSeeds) {
    Dice dice(seed, 11);
    Shape in = randomShape(seed, 2, 4, 4);
    std::vector<int64_t> perm(in.size());
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size(); i > 1; --i)
      std::swap(perm[i - 1], perm[dice.roll(0, i - 1)]);
    Shape out;
    for (int64_t p : perm)
      out.push_back(in[p]);
    check(unaryShapeModule("transpose", ", perm = " + list(perm), in, out),
          seed, rt::numElements(in));
  }
}

//===----------------------------------------------------------------------===//
// step.slice, step.concat, step.pad
//===----------------------------------------------------------------------===//

std::string sliceModule(const Shape &in, const std::vector<int64_t> &start,
                        const std::vector<int64_t> &limit,
                        const std::vector<int64_t> &strides) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    out.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  return unaryShapeModule("slice",
                          " start = " + list(start) + " limit = " +
                              list(limit) + " strides = " + list(strides),
                          in, out);
}

TEST(GradCheckShape, SliceRandom) {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    Dice dice(seed, 11);
    Shape in = randomShape(seed, 1, 3, 7);
    std::vector<int64_t> start, limit, strides;
    for (int64_t n : in) {
      start.push_back(dice.roll(0, n - 1));
      limit.push_back(dice.roll(start.back() + 1, n));
      strides.push_back(dice.roll(1, 3));
    }
    check(sliceModule(in, start, limit, strides), seed, rt::numElements(in));
  }
}

TEST(GradCheckShape, SliceStrideCases) {
  // Stride 1 inside both ends; a stride that divides the extent and reaches
  // the end (the spread is cut at the operand's end); a stride that leaves
  // a remainder; an empty slice (the gradient is all zeros).
  check(sliceModule({7}, {2}, {5}, {1}), 1, 7);
  check(sliceModule({7}, {1}, {7}, {3}), 1, 7);
  check(sliceModule({8}, {0}, {8}, {3}), 1, 8);
  check(sliceModule({4, 9}, {1, 2}, {4, 9}, {2, 4}), 1, 36);
  check(sliceModule({3, 5}, {0, 2}, {3, 2}, {1, 2}), 1, 15);
}

TEST(GradCheckShape, Concat) {
  for (uint64_t seed : kSeeds) {
    Dice dice(seed, 11);
    Shape base = randomShape(seed, 1, 3, 3);
    int64_t dim = dice.roll(0, base.size() - 1);
    std::vector<Shape> ins(3, base);
    Shape out = base;
    out[dim] = 0;
    for (Shape &s : ins) {
      s[dim] = dice.roll(1, 3);
      out[dim] += s[dim];
    }
    // The middle input is an input, not a param: it gets no gradient.
    std::string text = "func.func @f(", types, operands;
    for (int i = 0; i < 3; ++i) {
      std::string t = tensorType(ins[i]), name = "x" + std::to_string(i);
      text += std::string(i ? ", " : "") + "%" + name + ": " + t +
              " {step.kind = \"" + (i == 1 ? "input" : "param") +
              "\", step.name = \"" + name + "\"}";
      types += (i ? ", " : "") + t;
      operands += (i ? ", %" : "%") + name;
    }
    std::string to = tensorType(out);
    text += ") -> " + to + " {\n  %y = step.concat " + operands +
            " dim = " + std::to_string(dim) + " : " + types + " -> " + to +
            "\n  return %y : " + to + "\n}\n";
    SCOPED_TRACE(text);
    GradCheckOptions o;
    o.seed = seed;
    EXPECT_EQ(checkGradients(text, {{"x1", uniform(ins[1], seed)}}, o),
              rt::numElements(ins[0]) + rt::numElements(ins[2]));
  }
}

TEST(GradCheckShape, Pad) {
  for (uint64_t seed : kSeeds) {
    Dice dice(seed, 11);
    Shape in = randomShape(seed, 1, 3, 4), out;
    std::vector<int64_t> low, high;
    for (int64_t n : in) {
      low.push_back(dice.roll(0, 2));
      high.push_back(dice.roll(0, 2));
      out.push_back(low.back() + n + high.back());
    }
    check(unaryShapeModule("pad",
                           " low = " + list(low) + " high = " + list(high) +
                               " value = 1.5",
                           in, out),
          seed, rt::numElements(in));
  }
}

//===----------------------------------------------------------------------===//
// step.reduce_sum, step.reduce_mean, step.reduce_max
//===----------------------------------------------------------------------===//

/// A random reduction of a random shape: dims a random non-empty subset.
std::string reduceModule(const std::string &op, uint64_t seed, bool keepdim,
                         Shape &in) {
  Dice dice(seed, 11);
  in = randomShape(seed, 1, 3, 4);
  std::vector<int64_t> dims;
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    bool last = d + 1 == static_cast<int64_t>(in.size());
    bool reduced = dice.roll(0, 1) || (dims.empty() && last);
    if (reduced)
      dims.push_back(d);
    if (!reduced || keepdim)
      out.push_back(reduced ? 1 : in[d]);
  }
  return unaryShapeModule(op,
                          " dims = " + list(dims) + (keepdim ? " keepdim" : ""),
                          in, out);
}

/// Distinct values 0.05 apart in a random order, so no two are within h of
/// each other and reduce_max's argmax is stable under the perturbation.
HostTensor distinct(const Shape &shape, uint64_t seed) {
  Dice dice(seed, 11);
  std::vector<double> v(rt::numElements(shape));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 0.05 * (static_cast<double>(i) - static_cast<double>(v.size()) / 2);
  for (size_t i = v.size(); i > 1; --i)
    std::swap(v[i - 1], v[dice.roll(0, i - 1)]);
  return literal(shape, v);
}

class GradCheckReduce : public ::testing::TestWithParam<const char *> {};

TEST_P(GradCheckReduce, MatchesFiniteDifferences) {
  std::string op = GetParam();
  for (uint64_t seed : kSeeds)
    for (bool keepdim : {false, true}) {
      Shape in;
      std::string text = reduceModule(op, seed, keepdim, in);
      HostTensor x = distinct(in, seed);
      check(text, seed, rt::numElements(in), &x);
    }
}

INSTANTIATE_TEST_SUITE_P(Shape, GradCheckReduce,
                         ::testing::Values("reduce_sum", "reduce_mean",
                                           "reduce_max"));

/// reduce_max's gradient on x with the harness's w, which must be
/// w[r] / count(r) at each maximum of reduction r and 0 elsewhere.
void expectAmaxSplit(const std::string &text, const HostTensor &x,
                     const std::vector<int64_t> &group,
                     const std::vector<int> &count) {
  detail::Gradients g = detail::computeGradients(text, {{"x", x}}, {});
  ASSERT_EQ(g.error, "");
  const HostTensor &gx = g.analytic.at("x");
  for (int64_t j = 0; j < x.numel(); ++j) {
    // torch: (grad / count) * mask, one f32 division.
    float expected =
        group[j] < 0 ? 0.0f
                     : static_cast<float>(g.w.getAsDouble(group[j])) /
                           static_cast<float>(count[group[j]]);
    EXPECT_EQ(gx.getAsDouble(j), static_cast<double>(expected)) << j;
  }
}

TEST(GradCheckShape, ReduceMaxSplitsTiesEvenly) {
  // Rows [1, 3, 3], [2, 2, 2], [5, -1, 0]: 2, 3 and 1 maxima.
  HostTensor x = literal({3, 3}, {1, 3, 3, 2, 2, 2, 5, -1, 0});
  std::vector<int64_t> group = {-1, 0, 0, 1, 1, 1, 2, -1, -1};
  expectAmaxSplit(unaryShapeModule("reduce_max", " dims = [1]", {3, 3}, {3}),
                  x, group, {2, 3, 1});
  expectAmaxSplit(
      unaryShapeModule("reduce_max", " dims = [1] keepdim", {3, 3}, {3, 1}), x,
      group, {2, 3, 1});
  // Over both dims: 5 is the only maximum.
  expectAmaxSplit(unaryShapeModule("reduce_max", " dims = [0, 1]", {3, 3}, {}),
                  x, {-1, -1, -1, -1, -1, -1, 0, -1, -1}, {1});
  // Columns of [[4, 4], [4, 1]]: 2 and 1 maxima.
  expectAmaxSplit(unaryShapeModule("reduce_max", " dims = [0]", {2, 2}, {2}),
                  literal({2, 2}, {4, 4, 4, 1}), {0, 1, 0, -1}, {2, 1});
}

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

/// lhs [batch..., M, K] (transposed when ta), rhs [batch..., K, N] or
/// [K, N] when `shared` (transposed when tb); both params.
std::string matmulModule(const Shape &batch, int64_t m, int64_t k, int64_t n,
                         bool ta, bool tb, bool shared) {
  Shape lhs = batch, rhs = shared ? Shape() : batch, out = batch;
  lhs.insert(lhs.end(), {ta ? k : m, ta ? m : k});
  rhs.insert(rhs.end(), {tb ? n : k, tb ? k : n});
  out.insert(out.end(), {m, n});
  std::string tl = tensorType(lhs), tr = tensorType(rhs), to = tensorType(out);
  return "func.func @f(%a: " + tl +
         " {step.kind = \"param\", step.name = \"a\"}, %b: " + tr +
         " {step.kind = \"param\", step.name = \"b\"}) -> " + to +
         " {\n  %y = step.matmul %a, %b" + (ta ? " transpose_a" : "") +
         (tb ? " transpose_b" : "") + " : " + tl + ", " + tr + " -> " + to +
         "\n  return %y : " + to + "\n}\n";
}

TEST(GradCheckShape, MatmulAllTransposes) {
  struct Batch {
    Shape dims;
    bool shared;
  };
  const Batch batches[] = {{{}, false}, {{2}, false}, {{2, 2}, false},
                           {{3}, true}, {{2, 2}, true}};
  uint64_t seed = 0;
  for (const Batch &batch : batches)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Dice dice(++seed, 11);
        int64_t m = dice.roll(1, 4), k = dice.roll(1, 5), n = dice.roll(1, 4);
        int64_t lhs = rt::numElements(batch.dims) * m * k;
        int64_t rhs = (batch.shared ? 1 : rt::numElements(batch.dims)) * k * n;
        check(matmulModule(batch.dims, m, k, n, ta, tb, batch.shared), seed,
              lhs + rhs);
      }
}

TEST(GradCheckShape, MatmulWithOneParam) {
  // A batch of activations times a shared weight, one of them an input:
  // only the param's gradient is built and checked.
  for (bool paramIsLhs : {false, true}) {
    std::string text = matmulModule({3}, 2, 4, 5, false, true, true);
    std::string input = paramIsLhs ? "b" : "a";
    text.replace(text.find("\"param\", step.name = \"" + input + "\""), 7,
                 "\"input\"");
    Shape inputShape = paramIsLhs ? Shape{5, 4} : Shape{3, 2, 4};
    EXPECT_EQ(checkGradients(text, {{input, uniform(inputShape, 9)}}),
              paramIsLhs ? 24 : 20);
  }
}

} // namespace
} // namespace step::testing
