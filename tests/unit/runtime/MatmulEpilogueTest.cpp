//===- MatmulEpilogueTest.cpp - Reading `matmul` fusions for cuBLASLt -----===//
//
// runtime/cuda/MatmulEpilogue.h on hand-built fusion bodies: every form
// step-fuse produces (matmul, + bias in either add order, + relu or tanh
// GELU, batched; step-fuse-bias-grad's sum of an operand) gives its epilogue and the fusion operands that feed
// cuBLASLt; every body cuBLASLt cannot run as one call is refused with a
// message saying why. Pure: runs without CUDA.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/MatmulEpilogue.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace {
using namespace step::rt;
using namespace step::rt::cuda;

/// A fusion body under construction and the step that holds it.
struct Body {
  std::shared_ptr<Plan> plan = std::make_shared<Plan>();

  int64_t buffer(DType t, Shape s) {
    BufferDesc b;
    b.name = "%" + std::to_string(plan->buffers.size());
    b.dtype = t;
    b.shape = std::move(s);
    plan->buffers.push_back(b);
    return static_cast<int64_t>(plan->buffers.size()) - 1;
  }
  int64_t arg(DType t, Shape s) {
    int64_t id = buffer(t, std::move(s));
    plan->arguments.push_back(id);
    return id;
  }
  /// A step with one new result of type (t, s).
  int64_t step(const std::string &op, nlohmann::json attrs,
               std::vector<int64_t> operands, DType t, Shape s) {
    PlanStep st;
    st.op = "step." + op;
    st.attrs = attrs.is_null() ? nlohmann::json::object() : std::move(attrs);
    st.operands = std::move(operands);
    int64_t r = buffer(t, std::move(s));
    st.results = {r};
    plan->steps.push_back(std::move(st));
    return r;
  }
  PlanStep fusion(std::vector<int64_t> results, const char *kind = "matmul") {
    plan->results = std::move(results);
    PlanStep s;
    s.op = "step.fusion";
    s.attrs = {{"kind", kind}};
    for (size_t i = 0; i < plan->arguments.size(); ++i)
      s.operands.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < plan->results.size(); ++i)
      s.results.push_back(100 + static_cast<int64_t>(i));
    s.body = plan;
    return s;
  }
};

const DType F = DType::F32;

/// lhs [4, 8] (argument 0), rhs [8, 16] (argument 1), bias [16]
/// (argument 2); returns the product's buffer.
int64_t matmul(Body &b, int64_t *bias, DType t = F) {
  int64_t x = b.arg(t, {4, 8}), w = b.arg(t, {8, 16});
  *bias = b.arg(t, {16});
  return b.step("matmul", {{"transpose_b", false}}, {x, w}, t, {4, 16});
}

int64_t addBias(Body &b, int64_t mm, int64_t bias, bool swapped = false) {
  int64_t bc = b.step("broadcast_in_dim", {{"broadcast_dimensions", {1}}},
                      {bias}, F, {4, 16});
  return b.step("add", nullptr, swapped ? std::vector<int64_t>{bc, mm}
                                        : std::vector<int64_t>{mm, bc},
                F, {4, 16});
}

void expectRefused(const PlanStep &s, const std::string &why) {
  try {
    readMatmulFusion(s, "plan step 7 (step.fusion)");
    ADD_FAILURE() << "accepted; expected a refusal mentioning '" << why << "'";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("plan step 7 (step.fusion): matmul fusion: "),
              std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  }
}

//===----------------------------------------------------------------------===//
// Accepted forms
//===----------------------------------------------------------------------===//

TEST(MatmulEpilogue, PlainMatmul) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  PlanStep s = b.fusion({mm});
  FusedMatmul f = readMatmulFusion(s, "x");
  EXPECT_EQ(f.epilogue, MatmulEpilogue::None);
  EXPECT_EQ(f.lhs, 0);
  EXPECT_EQ(f.rhs, 1);
  EXPECT_EQ(f.bias, -1);
  ASSERT_EQ(f.matmul, &s.body->steps[0]);
  EXPECT_TRUE(f.matmul->attrs.contains("transpose_b"));
  EXPECT_TRUE(isMatmulFusion(s));
}

TEST(MatmulEpilogue, BiasInEitherAddOrder) {
  for (bool swapped : {false, true}) {
    Body b;
    int64_t bias;
    int64_t mm = matmul(b, &bias);
    PlanStep s = b.fusion({addBias(b, mm, bias, swapped)});
    FusedMatmul f = readMatmulFusion(s, "x");
    EXPECT_EQ(f.epilogue, MatmulEpilogue::Bias) << swapped;
    EXPECT_EQ(f.bias, 2) << swapped;
  }
}

TEST(MatmulEpilogue, ActivationsWithAndWithoutBias) {
  struct Case {
    const char *op;
    bool bias;
    MatmulEpilogue want;
  };
  for (Case c : {Case{"relu", false, MatmulEpilogue::Relu},
                 Case{"relu", true, MatmulEpilogue::ReluBias},
                 Case{"gelu", false, MatmulEpilogue::Gelu},
                 Case{"gelu", true, MatmulEpilogue::GeluBias}}) {
    Body b;
    int64_t bias;
    int64_t v = matmul(b, &bias);
    if (c.bias)
      v = addBias(b, v, bias);
    nlohmann::json attrs = nlohmann::json::object();
    if (std::string(c.op) == "gelu")
      attrs["approximate"] = "tanh";
    v = b.step(c.op, attrs, {v}, F, {4, 16});
    FusedMatmul f = readMatmulFusion(b.fusion({v}), "x");
    EXPECT_EQ(f.epilogue, c.want) << matmulEpilogueName(c.want);
    EXPECT_EQ(f.bias, c.bias ? 2 : -1) << matmulEpilogueName(c.want);
  }
  EXPECT_STREQ(matmulEpilogueName(MatmulEpilogue::GeluBias), "gelu_bias");
}

TEST(MatmulEpilogue, GeluAuxStoresGelusInputInEitherResultOrder) {
  for (bool bias : {false, true})
    for (bool auxFirst : {false, true}) {
      Body b;
      int64_t biasArg;
      int64_t pre = matmul(b, &biasArg);
      if (bias)
        pre = addBias(b, pre, biasArg);
      int64_t g = b.step("gelu", {{"approximate", "tanh"}}, {pre}, F, {4, 16});
      FusedMatmul f =
          readMatmulFusion(b.fusion(auxFirst ? std::vector<int64_t>{pre, g}
                                             : std::vector<int64_t>{g, pre}),
                           "x");
      EXPECT_EQ(f.epilogue,
                bias ? MatmulEpilogue::GeluAuxBias : MatmulEpilogue::GeluAux);
      EXPECT_EQ(f.result, auxFirst ? 1 : 0);
      EXPECT_EQ(f.auxResult, auxFirst ? 0 : 1);
      EXPECT_EQ(f.bias, bias ? 2 : -1);
      EXPECT_EQ(f.aux, -1);
      EXPECT_EQ(f.biasGrad, -1);
    }
  EXPECT_STREQ(matmulEpilogueName(MatmulEpilogue::GeluAuxBias),
               "gelu_aux_bias");
}

/// dy [2, 4, k] (argument 0) times w [16, k] transposed (argument 1), the
/// GELU input x [2, 4, 16] (argument 2): gelu_grad(dy w^T, x).
int64_t dgelu(Body &b, const char *approx = "tanh", int64_t k = 8) {
  int64_t dy = b.arg(F, {2, 4, k}), w = b.arg(F, {16, k});
  int64_t x = b.arg(F, {2, 4, 16});
  int64_t mm =
      b.step("matmul", {{"transpose_b", true}}, {dy, w}, F, {2, 4, 16});
  return b.step("gelu_grad", {{"approximate", approx}}, {mm, x}, F, {2, 4, 16});
}

TEST(MatmulEpilogue, DGeluAndItsBiasGradientInEitherResultOrder) {
  Body plain;
  FusedMatmul f = readMatmulFusion(plain.fusion({dgelu(plain)}), "x");
  EXPECT_EQ(f.epilogue, MatmulEpilogue::DGelu);
  EXPECT_EQ(f.lhs, 0);
  EXPECT_EQ(f.rhs, 1);
  EXPECT_EQ(f.aux, 2);
  EXPECT_EQ(f.result, 0);
  EXPECT_EQ(f.biasGrad, -1);
  EXPECT_EQ(f.bias, -1);
  for (bool gradFirst : {true, false}) {
    Body b;
    int64_t g = dgelu(b);
    int64_t db = b.step("reduce_sum", {{"dims", {0, 1}}}, {g}, F, {16});
    FusedMatmul d =
        readMatmulFusion(b.fusion(gradFirst ? std::vector<int64_t>{g, db}
                                            : std::vector<int64_t>{db, g}),
                         "x");
    EXPECT_EQ(d.epilogue, MatmulEpilogue::DGeluBgrad);
    EXPECT_EQ(d.aux, 2);
    EXPECT_EQ(d.result, gradFirst ? 0 : 1);
    EXPECT_EQ(d.biasGrad, gradFirst ? 1 : 0);
  }
  EXPECT_STREQ(matmulEpilogueName(MatmulEpilogue::DGeluBgrad), "dgelu_bgrad");
}

TEST(MatmulEpilogue, DGeluFormsCuBlasLtCannotRunAreRefused) {
  {
    Body b;
    expectRefused(b.fusion({dgelu(b, "none")}), "tanh approximation");
  }
  { // the product as gelu_grad's input, not its gradient
    Body b;
    int64_t dy = b.arg(F, {4, 8}), w = b.arg(F, {8, 16}), g = b.arg(F, {4, 16});
    int64_t mm = b.step("matmul", nullptr, {dy, w}, F, {4, 16});
    int64_t r =
        b.step("gelu_grad", {{"approximate", "tanh"}}, {g, mm}, F, {4, 16});
    expectRefused(b.fusion({r}), "cannot be a cuBLASLt epilogue");
  }
  { // GELU's input computed in the body
    Body b;
    int64_t dy = b.arg(F, {4, 8}), w = b.arg(F, {8, 16}), x = b.arg(F, {4, 16});
    int64_t mm = b.step("matmul", nullptr, {dy, w}, F, {4, 16});
    int64_t nx = b.step("neg", nullptr, {x}, F, {4, 16});
    int64_t r =
        b.step("gelu_grad", {{"approximate", "tanh"}}, {mm, nx}, F, {4, 16});
    expectRefused(b.fusion({r}), "must be a fusion operand");
  }
  { // a bias add before it
    Body b;
    int64_t bias;
    int64_t mm = matmul(b, &bias);
    int64_t pre = addBias(b, mm, bias);
    int64_t x = b.arg(F, {4, 16});
    int64_t r =
        b.step("gelu_grad", {{"approximate", "tanh"}}, {pre, x}, F, {4, 16});
    expectRefused(b.fusion({r}), "cannot be a cuBLASLt epilogue");
  }
  { // a sum over another dim
    Body b;
    int64_t g = dgelu(b);
    int64_t s = b.step("reduce_sum", {{"dims", {0, 2}}}, {g}, F, {4});
    expectRefused(b.fusion({g, s}), "every dim but the last");
  }
  { // read twice in the body
    Body b;
    int64_t g = dgelu(b);
    int64_t s = b.step("reduce_sum", {{"dims", {0, 1}}}, {g}, F, {16});
    b.step("neg", nullptr, {g}, F, {2, 4, 16});
    expectRefused(b.fusion({g, s}), "every dim but the last");
  }
  { // the gradient not returned
    Body b;
    int64_t g = dgelu(b);
    int64_t s = b.step("reduce_sum", {{"dims", {0, 1}}}, {g}, F, {16});
    expectRefused(b.fusion({s}), "not a result");
  }
  { // a contraction of one: no DGELU kernels (K = 2 is read as usual)
    Body b;
    expectRefused(b.fusion({dgelu(b, "tanh", 1)}), "contraction of one");
    Body two;
    EXPECT_EQ(readMatmulFusion(two.fusion({dgelu(two, "tanh", 2)}), "x").epilogue,
              MatmulEpilogue::DGelu);
  }
}

/// A weight gradient's matmul of lhs (k x m, or m x k untransposed) and rhs
/// (k x n, or n x k transposed) and the sum of one operand over k: the
/// product (result 0) and the sum (result 1) of `summed` over `dims`.
struct OperandSum {
  int64_t product, sum;
};
OperandSum operandSum(Body &b, bool ta, bool tb, bool rhs,
                      std::vector<int64_t> dims, DType sumType = F,
                      int64_t m = 4, int64_t k = 16) {
  const int64_t n = 8;
  int64_t x = b.arg(F, ta ? Shape{k, m} : Shape{m, k});
  int64_t g = b.arg(F, tb ? Shape{n, k} : Shape{k, n});
  int64_t mm = b.step("matmul", {{"transpose_a", ta}, {"transpose_b", tb}},
                      {x, g}, F, {m, n});
  int64_t sum = b.step("reduce_sum", {{"dims", dims}}, {rhs ? g : x}, sumType,
                       {rhs ? n : m});
  return {mm, sum};
}

TEST(MatmulEpilogue, AnOperandsSumOverKIsBgradAOrBgradB) {
  // The untransposed rhs's sum (a vector of n): BGRADA; the transposed
  // lhs's (of m): BGRADB; the other operand either way, the results in
  // either order.
  struct Case {
    bool ta, tb, rhs;
    int64_t dim;
    MatmulEpilogue want;
  };
  for (Case c : {Case{true, false, true, 0, MatmulEpilogue::BgradA},
                 Case{false, false, true, 0, MatmulEpilogue::BgradA},
                 Case{true, false, false, 0, MatmulEpilogue::BgradB},
                 Case{true, true, false, 0, MatmulEpilogue::BgradB}})
    for (bool sumFirst : {false, true}) {
      Body b;
      OperandSum o = operandSum(b, c.ta, c.tb, c.rhs, {c.dim});
      FusedMatmul f = readMatmulFusion(
          b.fusion(sumFirst ? std::vector<int64_t>{o.sum, o.product}
                            : std::vector<int64_t>{o.product, o.sum}),
          "x");
      EXPECT_EQ(f.epilogue, c.want) << c.ta << c.tb << c.rhs;
      EXPECT_EQ(f.lhs, 0);
      EXPECT_EQ(f.rhs, 1);
      EXPECT_EQ(f.result, sumFirst ? 1 : 0);
      EXPECT_EQ(f.biasGrad, sumFirst ? 0 : 1);
      EXPECT_EQ(f.bias, -1);
      EXPECT_EQ(f.aux, -1);
    }
  EXPECT_STREQ(matmulEpilogueName(MatmulEpilogue::BgradA), "bgrada");
  EXPECT_STREQ(matmulEpilogueName(MatmulEpilogue::BgradB), "bgradb");
}

TEST(MatmulEpilogue, OperandSumsCuBlasLtCannotRunAreRefused) {
  // cuBLASLt's BGRADA takes an untransposed A (our rhs) only, BGRADB a
  // transposed B (our lhs) only: the other two layouts are named.
  for (bool ta : {false, true}) {
    Body b;
    OperandSum o = operandSum(b, ta, true, true, {1});
    expectRefused(b.fusion({o.product, o.sum}),
                  "BGRADA takes an untransposed rhs only");
  }
  for (bool tb : {false, true}) {
    Body b;
    OperandSum o = operandSum(b, false, tb, false, {1});
    expectRefused(b.fusion({o.product, o.sum}),
                  "BGRADB takes a transposed lhs only");
  }
  { // over the other dim of a square rhs: a vector of the right length
    // (n = k = 8), but of the rows' sums, not the columns'
    Body b;
    int64_t x = b.arg(F, {8, 4}), g = b.arg(F, {8, 8});
    int64_t mm =
        b.step("matmul", {{"transpose_a", true}}, {x, g}, F, {4, 8});
    int64_t s = b.step("reduce_sum", {{"dims", {1}}}, {g}, F, {8});
    expectRefused(b.fusion({mm, s}), "not a bias gradient");
  }
  { // one operand read twice: either side's sum
    Body b;
    int64_t g = b.arg(F, {8, 8});
    int64_t mm = b.step("matmul", {{"transpose_a", true}}, {g, g}, F, {8, 8});
    int64_t s = b.step("reduce_sum", {{"dims", {0}}}, {g}, F, {8});
    expectRefused(b.fusion({mm, s}), "reads one operand twice");
  }
  { // into another element type than the product's
    Body b;
    OperandSum o = operandSum(b, true, false, true, {0}, DType::BF16);
    expectRefused(b.fusion({o.product, o.sum}), "not a bias gradient");
  }
  { // the sum read again in the body instead of returned
    Body b;
    OperandSum o = operandSum(b, true, false, true, {0});
    int64_t neg = b.step("neg", nullptr, {o.sum}, F, {8});
    expectRefused(b.fusion({o.product, neg}), "not a bias gradient");
  }
  { // both operands summed: cuBLASLt has one bias pointer
    Body b;
    OperandSum o = operandSum(b, true, false, true, {0});
    b.step("reduce_sum", {{"dims", {0}}}, {0}, F, {4});
    expectRefused(b.fusion({o.product, o.sum}), "a second sum");
  }
  { // the product continued by a bias add
    Body b;
    OperandSum o = operandSum(b, true, false, true, {0});
    int64_t bias = b.arg(F, {8});
    int64_t bc = b.step("broadcast_in_dim", {{"broadcast_dimensions", {1}}},
                        {bias}, F, {4, 8});
    int64_t y = b.step("add", nullptr, {o.product, bc}, F, {4, 8});
    expectRefused(b.fusion({y, o.sum}), "leave the product as it is");
  }
  // Shapes without kernels (nvmath-python's tests): either form over a
  // contraction of one, BGRADB of a one-row product (BGRADA of one is
  // read).
  for (bool rhs : {true, false}) {
    Body b;
    OperandSum o = operandSum(b, true, false, rhs, {0}, F, 4, 1);
    expectRefused(b.fusion({o.product, o.sum}), "contraction of one (K = 1)");
  }
  {
    Body b;
    OperandSum o = operandSum(b, true, false, false, {0}, F, 1, 16);
    expectRefused(b.fusion({o.product, o.sum}), "one-row product");
    Body a;
    OperandSum r = operandSum(a, true, false, true, {0}, F, 1, 16);
    EXPECT_EQ(readMatmulFusion(a.fusion({r.product, r.sum}), "x").epilogue,
              MatmulEpilogue::BgradA);
  }
  { // a batch of matrices
    Body b;
    int64_t x = b.arg(F, {2, 16, 4}), g = b.arg(F, {2, 16, 8});
    int64_t mm =
        b.step("matmul", {{"transpose_a", true}}, {x, g}, F, {2, 4, 8});
    int64_t s = b.step("reduce_sum", {{"dims", {1}}}, {g}, F, {2, 8});
    expectRefused(b.fusion({mm, s}), "not a bias gradient");
  }
}

TEST(MatmulEpilogue, OperandsInAnyArgumentOrderAndBatched) {
  // bias first, then rhs, then a batched lhs [2, 4, 8].
  Body b;
  int64_t bias = b.arg(F, {16}), w = b.arg(F, {8, 16}), x = b.arg(F, {2, 4, 8});
  int64_t mm = b.step("matmul", nullptr, {x, w}, F, {2, 4, 16});
  int64_t bc = b.step("broadcast_in_dim", {{"broadcast_dimensions", {2}}},
                      {bias}, F, {2, 4, 16});
  int64_t r = b.step("add", nullptr, {bc, mm}, F, {2, 4, 16});
  FusedMatmul f = readMatmulFusion(b.fusion({r}), "x");
  EXPECT_EQ(f.epilogue, MatmulEpilogue::Bias);
  EXPECT_EQ(f.lhs, 2);
  EXPECT_EQ(f.rhs, 1);
  EXPECT_EQ(f.bias, 0);
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

TEST(MatmulEpilogue, ExactGeluIsRefused) {
  for (const char *approx : {"none", ""}) {
    Body b;
    int64_t bias;
    int64_t mm = matmul(b, &bias);
    nlohmann::json attrs = nlohmann::json::object();
    if (*approx)
      attrs["approximate"] = approx;
    int64_t g = b.step("gelu", attrs, {mm}, F, {4, 16});
    expectRefused(b.fusion({g}), "tanh approximation");
  }
}

TEST(MatmulEpilogue, BiasOverAnotherDimIsRefused) {
  Body b;
  int64_t x = b.arg(F, {4, 8}), w = b.arg(F, {8, 16}), bias = b.arg(F, {4});
  int64_t mm = b.step("matmul", nullptr, {x, w}, F, {4, 16});
  int64_t bc = b.step("broadcast_in_dim", {{"broadcast_dimensions", {0}}},
                      {bias}, F, {4, 16});
  int64_t r = b.step("add", nullptr, {mm, bc}, F, {4, 16});
  expectRefused(b.fusion({r}), "rank-1 tensor of the last dim");
}

TEST(MatmulEpilogue, AResidualAddIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t res = b.arg(F, {4, 16});
  int64_t r = b.step("add", nullptr, {mm, res}, F, {4, 16});
  expectRefused(b.fusion({r}), "not a broadcast_in_dim");
}

TEST(MatmulEpilogue, BiasAfterTheActivationIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t a = b.step("relu", nullptr, {mm}, F, {4, 16});
  expectRefused(b.fusion({addBias(b, a, bias)}), "after the activation");
}

TEST(MatmulEpilogue, TwoActivationsAreRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t a = b.step("relu", nullptr, {mm}, F, {4, 16});
  int64_t c = b.step("relu", nullptr, {a}, F, {4, 16});
  expectRefused(b.fusion({c}), "a second activation");
}

TEST(MatmulEpilogue, AnotherOpIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t e = b.step("exp", nullptr, {mm}, F, {4, 16});
  expectRefused(b.fusion({e}), "cannot be a cuBLASLt epilogue");
}

TEST(MatmulEpilogue, AnIntermediateWithTwoUsesIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t r = b.step("add", nullptr, {mm, mm}, F, {4, 16});
  expectRefused(b.fusion({r}), "has 2 uses");
}

TEST(MatmulEpilogue, AProductAlsoReturnedBeforeReluIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t r = b.step("relu", nullptr, {mm}, F, {4, 16});
  expectRefused(b.fusion({mm, r}), "only GELU's input may be both");
}

TEST(MatmulEpilogue, ThreeResultsAreRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  int64_t r = b.step("relu", nullptr, {mm}, F, {4, 16});
  expectRefused(b.fusion({mm, r, r}), "one result (two with");
}

TEST(MatmulEpilogue, ASideComputationIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  b.step("neg", nullptr, {bias}, F, {16});
  expectRefused(b.fusion({mm}), "does not feed the result");
}

TEST(MatmulEpilogue, ABiasOfAnotherDtypeIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias, DType::BF16);
  b.plan->buffers[bias].dtype = F;
  int64_t bc = b.step("broadcast_in_dim", {{"broadcast_dimensions", {1}}},
                      {bias}, DType::BF16, {4, 16});
  int64_t r = b.step("add", nullptr, {mm, bc}, DType::BF16, {4, 16});
  expectRefused(b.fusion({r}), "the bias is f32");
}

TEST(MatmulEpilogue, NotAMatmulFusionIsRefused) {
  Body b;
  int64_t bias;
  int64_t mm = matmul(b, &bias);
  PlanStep loop = b.fusion({mm}, "loop");
  EXPECT_FALSE(isMatmulFusion(loop));
  expectRefused(loop, "kind is not \"matmul\"");
  Body none;
  none.arg(F, {4});
  int64_t n = none.step("neg", nullptr, {0}, F, {4});
  expectRefused(none.fusion({n}), "no step.matmul");
}

} // namespace
