//===- TraceInterpretTest.cpp - Traced graphs compute hand-derived values -===//
//
// Small models traced through the public API and run on the reference
// interpreter (Graph::run -> step::interpret). Expected values are worked
// out by hand in the comments; f32 results are compared within 1e-6 (a few
// ulps of values of order 1) unless the comment says why more is needed.
//
//===----------------------------------------------------------------------===//

#include "TraceTestUtil.h"

#include <cmath>

namespace step::trace {
namespace {
using namespace test;

/// Ends the graph with a dummy loss and runs it; returns the extra outputs.
std::vector<rt::HostTensor>
runExtras(Graph &g, const std::vector<Tensor> &outs,
          const std::map<std::string, rt::HostTensor> &inputs) {
  Tensor anchor = g.scalar(0.0);
  g.outputList(anchor, outs);
  std::vector<rt::HostTensor> r = g.run(inputs);
  r.erase(r.begin());
  return r;
}

TEST(TraceInterpret, LinearRelu) {
  Graph g;
  Tensor x = g.input("x", {2, 2});
  Tensor w = g.input("w", {2, 2});
  Tensor b = g.input("b", {2});
  Tensor y = relu(matmul(x, w) + b);
  // x @ w = [[1, -2], [3, -4]]; + 0.5 = [[1.5, -1.5], [3.5, -3.5]]; relu.
  auto r = runExtras(g, {y},
                     {{"x", tensor(DType::F32, {2, 2}, {1, 2, 3, 4})},
                      {"w", tensor(DType::F32, {2, 2}, {1, 0, 0, -1})},
                      {"b", tensor(DType::F32, {2}, {0.5, 0.5})}});
  expectNear(r[0], {2, 2}, {1.5, 0, 3.5, 0});
}

TEST(TraceInterpret, ScalarsAndPromotion) {
  Graph g;
  Tensor x = g.input("x", {3});
  Tensor i = g.input("i", {3}, DType::I32);
  std::vector<Tensor> outs = {3 - x,         x / 2,        pow(x, 2.0),
                              i * 2.5,       i * 2,        trunc_div(i, 2),
                              -x,            maximum(x, 0), where(x > 0, x, -1)};
  auto r = runExtras(g, outs,
                     {{"x", tensor(DType::F32, {3}, {-1, 0.5, 2})},
                      {"i", tensor(DType::I32, {3}, {7, -7, 1})}});
  expectNear(r[0], {3}, {4, 2.5, 1});
  expectNear(r[1], {3}, {-0.5, 0.25, 1});
  expectNear(r[2], {3}, {1, 0.25, 4});
  EXPECT_EQ(r[3].dtype(), DType::F32);
  expectNear(r[3], {3}, {17.5, -17.5, 2.5});
  EXPECT_EQ(r[4].dtype(), DType::I32);
  expectNear(r[4], {3}, {14, -14, 2});
  expectNear(r[5], {3}, {3, -3, 0}); // toward zero
  expectNear(r[6], {3}, {1, -0.5, -2});
  expectNear(r[7], {3}, {0, 0.5, 2});
  expectNear(r[8], {3}, {-1, 0.5, 2});
}

TEST(TraceInterpret, UnaryMath) {
  Graph g;
  Tensor x = g.input("x", {2});
  std::vector<Tensor> outs = {exp(x), sigmoid(x), gelu(x), sqrt(x * x),
                              gelu(x, GeluApprox::Tanh), abs(-x)};
  auto r = runExtras(g, outs, {{"x", tensor(DType::F32, {2}, {0, 1})}});
  expectNear(r[0], {2}, {1, std::exp(1.0)});
  expectNear(r[1], {2}, {0.5, 1 / (1 + std::exp(-1.0))});
  // gelu(1) = 0.5 * (1 + erf(1/sqrt(2))).
  expectNear(r[2], {2}, {0, 0.5 * (1 + std::erf(1 / std::sqrt(2.0)))});
  expectNear(r[3], {2}, {0, 1});
  double k = std::sqrt(2 / std::acos(-1.0)) * (1 + 0.044715);
  expectNear(r[4], {2}, {0, 0.5 * (1 + std::tanh(k))});
  expectNear(r[5], {2}, {0, 1});
}

// gelu_grad(g, x) = g gelu'(x): at x = 0, g / 2; a scalar-shaped grad
// broadcasts and i32 promotes to f32 as in mul.
TEST(TraceInterpret, GeluGrad) {
  Graph g;
  Tensor x = g.input("x", {2});
  Tensor s = g.input("s", {}, DType::I32);
  std::vector<Tensor> outs = {gelu_grad(x, x),
                              gelu_grad(s, x, GeluApprox::Tanh)};
  EXPECT_EQ(countOps(g, "step.gelu_grad"), 2);
  auto r = runExtras(g, outs,
                     {{"x", tensor(DType::F32, {2}, {0, 1})},
                      {"s", tensor(DType::I32, {}, {2})}});
  double pdf1 = std::exp(-0.5) / std::sqrt(2 * std::acos(-1.0));
  expectNear(r[0], {2}, {0, 0.5 * (1 + std::erf(1 / std::sqrt(2.0))) + pdf1});
  double beta = std::sqrt(2 / std::acos(-1.0)), t = std::tanh(beta * 1.044715);
  double d1 = 0.5 * (1 + t) + 0.5 * (1 - t * t) * beta * (1 + 3 * 0.044715);
  EXPECT_EQ(r[1].dtype(), DType::F32);
  expectNear(r[1], {2}, {1, 2 * d1});
}

TEST(TraceInterpret, StopGradientIsIdentity) {
  Graph g;
  Tensor x = g.input("x", {3});
  Tensor i = g.input("i", {2}, DType::I64);
  std::vector<Tensor> outs = {stop_gradient(x) * 2, stop_gradient(i)};
  EXPECT_EQ(countOps(g, "step.stop_gradient"), 2);
  auto r = runExtras(g, outs,
                     {{"x", tensor(DType::F32, {3}, {1, -2, 0.5})},
                      {"i", tensor(DType::I64, {2}, {5, -6})}});
  expectNear(r[0], {3}, {2, -4, 1});
  EXPECT_EQ(r[1].dtype(), DType::I64);
  expectNear(r[1], {2}, {5, -6});
}

TEST(TraceInterpret, Reductions) {
  Graph g;
  Tensor x = g.input("x", {2, 2});
  Tensor i = g.input("i", {2, 2}, DType::I32);
  std::vector<Tensor> outs = {sum(x, 0),    mean(x, -1, true), amax(x),
                              sum(i),       mean(x),           sum(x, std::vector<int64_t>{}),
                              amax(x, {0, 1}, true)};
  auto r = runExtras(g, outs,
                     {{"x", tensor(DType::F32, {2, 2}, {1, 2, 3, 4})},
                      {"i", tensor(DType::I32, {2, 2}, {1, 2, 3, 4})}});
  expectNear(r[0], {2}, {4, 6});
  expectNear(r[1], {2, 1}, {1.5, 3.5});
  expectNear(r[2], {}, {4});
  EXPECT_EQ(r[3].dtype(), DType::I64);
  expectNear(r[3], {}, {10});
  expectNear(r[4], {}, {2.5});
  expectNear(r[5], {}, {10}); // an empty dims list reduces every dim
  expectNear(r[6], {1, 1}, {4});
}

TEST(TraceInterpret, ShapeOps) {
  Graph g;
  Tensor x = g.input("x", {2, 3}); // [[0, 1, 2], [3, 4, 5]]
  Tensor i = g.input("i", {2}, DType::I64);
  std::vector<Tensor> outs = {
      reshape(x, {-1}),           t(x),
      slice(x, 1, -2, 3),         slice(x, 1, 0, 3, 2),
      concat({x, x}, -1),         pad(x, {0, 1}, {1, 0}, 9),
      concat({i, x.dim(0) + i}),  transpose(reshape(x, {1, 2, 3}), 0, 2)};
  auto r = runExtras(g, outs,
                     {{"x", tensor(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5})},
                      {"i", tensor(DType::I64, {2}, {7, 8})}});
  expectNear(r[0], {6}, {0, 1, 2, 3, 4, 5});
  expectNear(r[1], {3, 2}, {0, 3, 1, 4, 2, 5});
  expectNear(r[2], {2, 2}, {1, 2, 4, 5});
  expectNear(r[3], {2, 2}, {0, 2, 3, 5});
  expectNear(r[4], {2, 6}, {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  expectNear(r[5], {3, 4}, {9, 0, 1, 2, 9, 3, 4, 5, 9, 9, 9, 9});
  EXPECT_EQ(r[6].dtype(), DType::I64);
  expectNear(r[6], {4}, {7, 8, 9, 10});
  expectNear(r[7], {3, 2, 1}, {0, 3, 1, 4, 2, 5});
}

TEST(TraceInterpret, MatmulRankRules) {
  Graph g;
  Tensor a = g.input("a", {2, 1, 2}); // two 1x2 rows: [1, 2], [3, 4]
  Tensor m = g.input("m", {2, 2});    // [[1, 0], [0, 2]]
  Tensor v = g.input("v", {2});       // [1, 1]
  std::vector<Tensor> outs = {matmul(a, m), matmul(m, a.dim(0) * t(m)),
                              matmul(v, v), matmul(v, m), matmul(m, v),
                              matmul(m, reshape(a, {2, 2, 1}))};
  auto r = runExtras(g, outs,
                     {{"a", tensor(DType::F32, {2, 1, 2}, {1, 2, 3, 4})},
                      {"m", tensor(DType::F32, {2, 2}, {1, 0, 0, 2})},
                      {"v", tensor(DType::F32, {2}, {1, 1})}});
  expectNear(r[0], {2, 1, 2}, {1, 4, 3, 8});
  expectNear(r[1], {2, 2}, {2, 0, 0, 8}); // m @ (2 * m^T)
  expectNear(r[2], {}, {2});
  expectNear(r[3], {2}, {1, 2});
  expectNear(r[4], {2}, {1, 2});
  // [2, 2] @ [2, 2, 1]: the lhs is broadcast over the batch of the rhs.
  expectNear(r[5], {2, 2, 1}, {1, 4, 3, 8});
}

TEST(TraceInterpret, SoftmaxLayerNormEmbedding) {
  Graph g;
  Tensor x = g.input("x", {1, 2});
  Tensor w = g.param("w", {2}, init::ones());
  Tensor table = g.input("table", {3, 2});
  Tensor idx = g.input("idx", {2}, DType::I32);
  std::vector<Tensor> outs = {softmax(x, -1), log_softmax(x, 1),
                              layer_norm(x, w), embedding(idx, table)};
  double ln3 = std::log(3.0);
  auto r = runExtras(
      g, outs,
      {{"x", tensor(DType::F32, {1, 2}, {0, ln3})},
       {"table", tensor(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6})},
       {"idx", tensor(DType::I32, {2}, {2, 0})}});
  // softmax([0, ln 3]) = [1/4, 3/4].
  expectNear(r[0], {1, 2}, {0.25, 0.75});
  expectNear(r[1], {1, 2}, {std::log(0.25), std::log(0.75)});
  // Mean ln3/2, biased variance (ln3/2)^2: normalized to [-1, 1] (eps 1e-5
  // shifts it by about 1e-5 / (2 var) = 4e-6, hence the tolerance).
  expectNear(r[2], {1, 2}, {-1, 1}, 2e-5);
  expectNear(r[3], {2, 2}, {5, 6, 1, 2});
}

TEST(TraceInterpret, CrossEntropyFlattensLeadingDims) {
  Graph g;
  Tensor logits = g.input("logits", {1, 2, 2});
  Tensor y = g.input("y", {1, 2}, DType::I64);
  Tensor y2 = g.input("y2", {1, 2}, DType::I64);
  std::vector<Tensor> outs = {cross_entropy(logits, y),
                              cross_entropy(logits, y, Reduction::None),
                              cross_entropy(logits, y2, Reduction::Mean, 5),
                              cross_entropy(logits, y, Reduction::Sum)};
  double ln3 = std::log(3.0);
  // Row 0: [0, ln 3], target 1 -> -log(3/4); row 1: [0, 0], target 0 -> ln 2.
  double l0 = -std::log(0.75), l1 = std::log(2.0);
  auto r = runExtras(g, outs,
                     {{"logits", tensor(DType::F32, {1, 2, 2}, {0, ln3, 0, 0})},
                      {"y", tensor(DType::I64, {1, 2}, {1, 0})},
                      {"y2", tensor(DType::I64, {1, 2}, {1, 5})}});
  expectNear(r[0], {}, {(l0 + l1) / 2});
  expectNear(r[1], {1, 2}, {l0, l1});
  expectNear(r[2], {}, {l0}); // row 1 ignored, mean over one row
  expectNear(r[3], {}, {l0 + l1});
}

TEST(TraceInterpret, DropoutAndAttention) {
  Graph g;
  Tensor x = g.input("x", {1000});
  Tensor q = g.input("q", {1, 2, 2});
  Tensor kv = g.input("kv", {1, 1, 2});
  std::vector<Tensor> outs = {dropout(x, 0.5, 42), dropout(x, 0.5, 42),
                              scaled_dot_product_attention(q, kv, kv)};
  rt::HostTensor ones(DType::F32, {1000});
  for (int64_t i = 0; i < 1000; ++i)
    ones.setFromDouble(i, 1.0);
  auto r = runExtras(g, outs,
                     {{"x", ones},
                      {"q", tensor(DType::F32, {1, 2, 2}, {1, 2, 3, 4})},
                      {"kv", tensor(DType::F32, {1, 1, 2}, {5, 6})}});
  int kept = 0;
  for (double v : values(r[0])) {
    EXPECT_TRUE(v == 0.0 || v == 2.0) << v; // scaled by 1 / (1 - p)
    kept += v != 0;
  }
  EXPECT_NEAR(kept, 500, 80); // binomial(1000, 1/2): std 16
  EXPECT_TRUE(r[0].bitwiseEqual(r[1])); // same seed, same mask
  // One key: every query attends to it with weight 1, so the output is v.
  expectNear(r[2], {1, 2, 2}, {5, 6, 5, 6});
}

TEST(TraceInterpret, ConstantsIotaArange) {
  Graph g;
  Tensor x = g.input("x", {3});
  std::vector<Tensor> outs = {g.arange(1, 7, 2), g.arange(3, DType::F32) + x,
                              g.iota({2, 3}, 1, DType::I32),
                              g.full({2}, 1.5, DType::BF16),
                              g.constant(tensor(DType::I1, {2}, {1, 0}))};
  auto r = runExtras(g, outs, {{"x", tensor(DType::F32, {3}, {10, 10, 10})}});
  EXPECT_EQ(r[0].dtype(), DType::I64);
  expectNear(r[0], {3}, {1, 3, 5});
  expectNear(r[1], {3}, {10, 11, 12});
  expectNear(r[2], {2, 3}, {0, 1, 2, 0, 1, 2});
  EXPECT_EQ(r[3].dtype(), DType::BF16);
  expectNear(r[3], {2}, {1.5, 1.5});
  EXPECT_EQ(r[4].dtype(), DType::I1);
  expectNear(r[4], {2}, {1, 0});
}

TEST(TraceInterpret, RunTakesParamsByNameOrInitialValues) {
  Graph g(4);
  Tensor x = g.input("x", {2});
  Tensor w = g.param("w", {2}, init::ones());
  g.output(sum(x * w));
  auto in = tensor(DType::F32, {2}, {2, 3});
  expectNear(g.run({{"x", in}})[0], {}, {5});
  std::map<std::string, rt::HostTensor> params{
      {"w", tensor(DType::F32, {2}, {10, 100})}};
  expectNear(g.run({{"x", in}}, &params)[0], {}, {320});
  EXPECT_THROW(g.run({}), rt::Error);                  // x missing
  EXPECT_THROW(g.run({{"x", in}, {"typo", in}}), rt::Error);
  std::string msg = errorOf<rt::Error>(
      [&] { g.run({{"x", tensor(DType::I32, {2}, {1, 2})}}); });
  EXPECT_CONTAINS(msg, "argument 'x'");
}

TEST(TraceInterpret, DynamicBatch) {
  Graph g;
  Tensor x = g.input("x", {kDynamic, 2});
  Tensor w = g.param("w", {2, 3}, init::ones());
  Tensor h = relu(matmul(x, w)); // [?, 3]; no broadcast needed
  g.output(mean(h));
  EXPECT_CONTAINS(g.mlir(), "tensor<?x2xf32>");
  // Batch 1 and batch 3 through one traced function.
  expectNear(g.run({{"x", tensor(DType::F32, {1, 2}, {1, 2})}})[0], {}, {3});
  expectNear(g.run({{"x", tensor(DType::F32, {3, 2}, {1, 1, 0, 0, -5, 1})}})[0],
             {}, {2.0 / 3});
}

} // namespace
} // namespace step::trace
