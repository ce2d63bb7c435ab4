//===- TraceInitTest.cpp - Parameter initializers and model files ---------===//
//
// Reproducibility (same seed and name -> same bits, independent streams per
// parameter), the statistics of each initializer against torch.nn.init's
// formulas, and the files writeModel produces.
//
//===----------------------------------------------------------------------===//

#include "TraceTestUtil.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "runtime/Npy.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace step::trace {
namespace {
using namespace test;

//===----------------------------------------------------------------------===//
// Random stream
//===----------------------------------------------------------------------===//

TEST(TraceInit, StreamIsTheStandardMt19937_64) {
  // [rand.predef]: the 10000th output of a default-constructed (seed 5489)
  // mt19937_64 is 9981545732273789042, on every conforming library.
  Rng rng(5489);
  uint64_t v = 0;
  for (int i = 0; i < 10000; ++i)
    v = rng.next();
  EXPECT_EQ(v, 9981545732273789042ull);
}

TEST(TraceInit, UniformAndBelowStayInRange) {
  Rng rng(1);
  for (int i = 0; i < 10000; ++i) {
    double u = rng.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    int64_t k = rng.below(7);
    EXPECT_GE(k, 0);
    EXPECT_LT(k, 7);
  }
}

TEST(TraceInit, ParamSeedDependsOnGraphSeedAndName) {
  EXPECT_EQ(paramSeed(0, "w"), paramSeed(0, "w"));
  EXPECT_NE(paramSeed(0, "w"), paramSeed(1, "w"));
  EXPECT_NE(paramSeed(0, "w1"), paramSeed(0, "w2"));
}

//===----------------------------------------------------------------------===//
// Reproducibility
//===----------------------------------------------------------------------===//

Graph twoParams(uint64_t seed) {
  Graph g(seed);
  g.param("a", {64, 32}, init::normal(0, 0.02));
  g.param("b", {32}, init::uniform(-1, 1));
  return g;
}

TEST(TraceInit, SameSeedGivesSameBits) {
  auto p = twoParams(7).initialParams(), q = twoParams(7).initialParams();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(p.at("a").bitwiseEqual(q.at("a")));
  EXPECT_TRUE(p.at("b").bitwiseEqual(q.at("b")));
}

TEST(TraceInit, DifferentSeedOrNameGivesDifferentValues) {
  auto p = twoParams(7).initialParams(), q = twoParams(8).initialParams();
  EXPECT_FALSE(p.at("a").bitwiseEqual(q.at("a")));
  Graph g(7);
  g.param("a", {4}, init::normal());
  g.param("c", {4}, init::normal());
  EXPECT_NE(values(g.initialParam("a")), values(g.initialParam("c")));
}

TEST(TraceInit, AddingAParamLeavesOthersUnchanged) {
  Graph before(3), after(3);
  before.param("a", {16}, init::normal());
  before.param("b", {32}, init::uniform(-1, 1));
  after.param("a", {16}, init::normal());
  after.param("new", {1000}, init::uniform());
  after.param("b", {32}, init::uniform(-1, 1));
  EXPECT_TRUE(before.initialParam("a").bitwiseEqual(after.initialParam("a")));
  EXPECT_TRUE(before.initialParam("b").bitwiseEqual(after.initialParam("b")));
}

TEST(TraceInit, ValuesAreRoundedOnceToTheDType) {
  Graph g(5);
  g.param("h", {8}, init::normal(), DType::BF16);
  rt::HostTensor h = g.initialParam("h");
  EXPECT_EQ(h.dtype(), DType::BF16);
  // The same draws in double, rounded directly to bf16 (not through f32).
  Rng rng(paramSeed(5, "h"));
  for (int64_t i = 0; i < 8; ++i) {
    rt::HostTensor one(DType::BF16, {1});
    one.setFromDouble(0, rng.normal());
    EXPECT_EQ(h.data<uint16_t>()[i], one.data<uint16_t>()[0]);
  }
}

//===----------------------------------------------------------------------===//
// Statistics (100k samples: the standard error of the mean is std/316)
//===----------------------------------------------------------------------===//

struct Stats {
  double mean, std, min, max;
};

Stats statsOf(const init::Init &init, const Shape &shape) {
  Graph g(11);
  g.param("p", shape, init);
  std::vector<double> v = values(g.initialParam("p"));
  double sum = 0, sq = 0, lo = v[0], hi = v[0];
  for (double x : v) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  double mean = sum / v.size();
  for (double x : v)
    sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / v.size()), lo, hi};
}

// Tolerances: 5 standard errors for the mean; 2% for the std (its relative
// standard error is about 1/sqrt(2n) = 0.2% for normals, 0.3% for uniforms).
void expectMoments(const Stats &s, double mean, double std) {
  EXPECT_NEAR(s.mean, mean, 5 * std / std::sqrt(1e5));
  EXPECT_NEAR(s.std, std, 0.02 * std);
}

TEST(TraceInitStats, Normal) {
  Stats s = statsOf(init::normal(1.0, 2.0), {100000});
  expectMoments(s, 1.0, 2.0);
}

TEST(TraceInitStats, Uniform) {
  Stats s = statsOf(init::uniform(-3.0, 5.0), {100000});
  EXPECT_GE(s.min, -3.0);
  EXPECT_LE(s.max, 5.0);
  expectMoments(s, 1.0, 8.0 / std::sqrt(12.0));
}

TEST(TraceInitStats, Constants) {
  Stats z = statsOf(init::zeros(), {10}), o = statsOf(init::ones(), {10});
  EXPECT_EQ(z.min, 0.0);
  EXPECT_EQ(z.max, 0.0);
  EXPECT_EQ(o.min, 1.0);
  EXPECT_EQ(o.max, 1.0);
}

// A [fan_in, fan_out] = [400, 250] weight: 100k samples.
TEST(TraceInitStats, KaimingUniformUsesFanIn) {
  Stats s = statsOf(init::kaimingUniform(init::Nonlinearity::Relu), {400, 250});
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 400);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_GT(s.max, 0.99 * bound);
  expectMoments(s, 0.0, bound / std::sqrt(3.0));
}

TEST(TraceInitStats, KaimingUniformLinearDefaultIsOneOverSqrtFanIn) {
  // nn.Linear's default: kaiming_uniform(a = sqrt(5)) -> U(+-1/sqrt(in)).
  Stats s = statsOf(init::kaimingUniform(init::Nonlinearity::LeakyRelu,
                                         std::sqrt(5.0)),
                    {400, 250});
  EXPECT_LE(s.max, 1.0 / 20);
  EXPECT_GT(s.max, 0.99 / 20);
}

TEST(TraceInitStats, KaimingNormalFanOut) {
  Stats s = statsOf(init::kaimingNormal(init::Nonlinearity::Relu, 0,
                                        init::FanMode::FanOut),
                    {400, 250});
  expectMoments(s, 0.0, std::sqrt(2.0 / 250));
}

TEST(TraceInitStats, Xavier) {
  double std = std::sqrt(2.0 / (400 + 250));
  expectMoments(statsOf(init::xavierNormal(), {400, 250}), 0.0, std);
  Stats u = statsOf(init::xavierUniform(2.0), {400, 250});
  EXPECT_LE(u.max, 2.0 * std::sqrt(3.0) * std);
  expectMoments(u, 0.0, 2.0 * std);
}

TEST(TraceInitStats, GainsAndFans) {
  using init::Nonlinearity;
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::Linear), 1.0);
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::Relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::LeakyRelu, 0.2),
                   std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::Selu), 0.75);
  init::Fans f = init::fans({3, 4, 5}); // receptive field 3, [in, out] = [4, 5]
  EXPECT_EQ(f.in, 12);
  EXPECT_EQ(f.out, 15);
  EXPECT_THROW(init::fans({5}), std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// Model files
//===----------------------------------------------------------------------===//

TEST(TraceModelFiles, WriteModelWritesParseableModelAndParams) {
  Graph g(9);
  Tensor x = g.input("x", {2, 3});
  Tensor w = g.param("w", {3, 4}, init::xavierUniform());
  Tensor b = g.param("b", {4}, init::zeros());
  g.output(sum(linear(x, w, b)));
  std::string dir = ::testing::TempDir() + "trace_model_" +
                    std::to_string(::getpid());
  g.writeModel(dir);

  namespace fs = std::filesystem;
  for (const auto &[name, value] : g.initialParams())
    EXPECT_TRUE(rt::readNpy(dir + "/params/" + name + ".npy")
                    .bitwiseEqual(value))
        << name;
  // No temporary files are left behind.
  int files = 0;
  for (auto &e : fs::recursive_directory_iterator(dir))
    files += e.is_regular_file();
  EXPECT_EQ(files, 3);

  std::ifstream in(dir + "/model.mlir");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), g.mlir());
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text.str(), &ctx);
  ASSERT_TRUE(module);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*module)));
  auto func = module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(func);
  EXPECT_EQ(argumentName(func, 0), "x");
  EXPECT_EQ(argumentName(func, 1), "w");
  EXPECT_EQ(func.getArgAttrOfType<mlir::StringAttr>(1, "step.kind").getValue(),
            "param");
  EXPECT_EQ(func.getArgAttrOfType<mlir::StringAttr>(0, "step.kind").getValue(),
            "input");
  EXPECT_EQ(resultName(func, 0), "loss");
  fs::remove_all(dir);
}

TEST(TraceModelFiles, ExtraOutputsAreNamed) {
  Graph g;
  Tensor x = g.input("x", {2});
  g.outputNamed(sum(x), {{"doubled", x * 2}});
  EXPECT_CONTAINS(g.mlir(), "-> (tensor<f32> {step.name = \"loss\"}, "
                            "tensor<2xf32> {step.name = \"doubled\"})");
  Graph h;
  Tensor y = h.input("y", {2});
  h.output(sum(y), y, y + 1);
  EXPECT_CONTAINS(h.mlir(), "{step.name = \"out2\"}");
}

TEST(TraceModelFiles, GraphCanBeMoved) {
  Graph g;
  Tensor x = g.input("x", {2});
  Graph moved = std::move(g);
  Tensor y = x + 1; // the tensor still refers to the moved graph
  moved.output(sum(y));
  EXPECT_CONTAINS(moved.mlir(), "step.add");
}

} // namespace
} // namespace step::trace
