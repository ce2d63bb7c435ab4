//===- PipelineTest.cpp - The training pipeline and its options -----------===//
//
// Option parsing (values and messages), the LR schedule inside @train_step
// against the host formula, and differential tests of the passes on the
// interpreter: @forward_backward's loss equals @forward's, step-grad-accum
// on a K-times larger batch equals autodiff of the model traced on it.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "PipelineTestUtil.h"
#include "compiler/pipeline/Train.h"
#include "compiler/trace/Trace.h"
#include "passes/Passes.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {
using namespace step;
using namespace step::trace;

template <typename F> std::string invalidArgument(F &&f) {
  try {
    f();
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return "";
}

TEST(OptionParsing, OptimizerValuesAndDefaults) {
  OptimizerOptions o = OptimizerOptions::parse("adamw,lr=3e-4,wd=0.1");
  EXPECT_EQ(o.kind, OptimizerOptions::Kind::Adamw);
  EXPECT_DOUBLE_EQ(*o.lr, 3e-4);
  EXPECT_DOUBLE_EQ(*o.weightDecay, 0.1);
  EXPECT_FALSE(o.beta1.has_value()); // the pass applies PyTorch's default
  o = OptimizerOptions::parse("sgd,momentum=0.9,nesterov=true");
  EXPECT_EQ(o.kind, OptimizerOptions::Kind::Sgd);
  EXPECT_DOUBLE_EQ(*o.momentum, 0.9);
  EXPECT_TRUE(o.nesterov);
  EXPECT_EQ(OptimizerOptions::parse("lamb").kind, OptimizerOptions::Kind::Lamb);
}

TEST(OptionParsing, OptimizerErrorsNameThePart) {
  EXPECT_EQ(invalidArgument([] { OptimizerOptions::parse("adam"); }),
            "--optimizer: unknown optimizer 'adam', expected sgd, adamw or "
            "lamb");
  EXPECT_EQ(invalidArgument([] { OptimizerOptions::parse("adamw,lr"); }),
            "--optimizer: 'lr' is not key=value");
  EXPECT_EQ(invalidArgument([] { OptimizerOptions::parse("adamw,lr=fast"); }),
            "--optimizer: lr=fast is not a number");
  EXPECT_NE(invalidArgument([] {
              OptimizerOptions::parse("adamw,rho=1");
            }).find("unknown key 'rho'"),
            std::string::npos);
  EXPECT_NE(invalidArgument([] {
              OptimizerOptions::parse("lr=1");
            }).find("must start with a kind"),
            std::string::npos);
}

TEST(OptionParsing, Schedules) {
  ScheduleOptions s = ScheduleOptions::parse("cosine,warmup=100,total=1000");
  EXPECT_EQ(s.kind, ScheduleOptions::Kind::Cosine);
  EXPECT_EQ(s.warmup, 100);
  EXPECT_EQ(s.total, 1000);
  EXPECT_EQ(invalidArgument(
                [] { ScheduleOptions::parse("linear,warmup=10,total=10"); }),
            "--schedule: linear needs total (10) > warmup (10)");
  EXPECT_EQ(invalidArgument([] { ScheduleOptions::parse("cosine,warmup=-1"); }),
            "--schedule: warmup=-1 must be a non-negative integer");
  EXPECT_EQ(invalidArgument([] { ScheduleOptions::parse("step"); }),
            "--schedule: unknown schedule 'step', expected constant, cosine "
            "or linear");
}

/// loss = sum(w * x) with x = 1: every gradient element is 1, so plain SGD
/// moves w by exactly -lr each update and the trajectory reads off the
/// schedule @train_step computes.
std::string unitGradientModel() {
  Graph g;
  Tensor w = g.param("w", {1}, init::zeros());
  Tensor x = g.input("x", {1});
  g.output(sum(w * x));
  return g.mlir();
}

class ScheduleTest : public testing::TestWithParam<std::string> {};

TEST_P(ScheduleTest, TrainStepFollowsTheHostFormula) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("sgd,lr=0.5");
  t.schedule = ScheduleOptions::parse(GetParam());
  rt::HostTensor w0(rt::DType::F32, {1});
  Trainer trainer(unitGradientModel(), t, {{"w", w0}});
  rt::HostTensor x(rt::DType::F32, {1});
  x.data<float>()[0] = 1.0f;
  double previous = 0;
  for (int64_t s = 0; s < 14; ++s) {
    trainer.step({{"x", x}});
    double w = trainer.state().at("w").getAsDouble(0);
    // The schedule is computed in f32 inside the step and w accumulates f32
    // roundings of ~0.5 * 2^-24 per step: 1e-6 relative is far above that
    // and far below any schedule mistake (a wrong step index moves lr by
    // >= 1/total = 10%).
    EXPECT_NEAR(previous - w, learningRate(t, s), 1e-6 * 0.5)
        << GetParam() << " at update " << s;
    previous = w;
  }
  EXPECT_EQ(trainer.state().at("opt.step").getAsDouble(0), 14);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ScheduleTest,
                         testing::Values("constant", "constant,warmup=3",
                                         "cosine,warmup=2,total=10",
                                         "cosine,total=12,min_ratio=0.1",
                                         "linear,warmup=4,total=10"));

/// A small MLP traced at batch `batch`.
std::string mlpModel(int64_t batch) {
  Graph g(7);
  Tensor x = g.input("x", {batch, 5});
  Tensor y = g.input("y", {batch}, DType::I64);
  Tensor w1 = g.param("w1", {5, 6}, init::normal(0, 0.5));
  Tensor b1 = g.param("b1", {6}, init::normal(0, 0.5));
  Tensor w2 = g.param("w2", {6, 3}, init::normal(0, 0.5));
  Tensor h = gelu(linear(x, w1, b1), GeluApprox::Tanh);
  g.output(cross_entropy(matmul(h, w2), y));
  return g.mlir();
}

std::map<std::string, rt::HostTensor> mlpValues(int64_t batch) {
  Graph g(7);
  Rng rng(11);
  rt::HostTensor x(rt::DType::F32, {batch, 5}), y(rt::DType::I64, {batch});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, rng.normal());
  for (int64_t i = 0; i < batch; ++i)
    y.data<int64_t>()[i] = rng.below(3);
  std::map<std::string, rt::HostTensor> values{{"x", x}, {"y", y}};
  for (auto &[name, shape] : std::map<std::string, rt::Shape>{
           {"w1", {5, 6}}, {"b1", {6}}, {"w2", {6, 3}}}) {
    rt::HostTensor p(rt::DType::F32, shape);
    for (int64_t i = 0; i < p.numel(); ++i)
      p.setFromDouble(i, 0.5 * rng.normal());
    values[name] = p;
  }
  return values;
}

/// Runs `pipeline` on the model and interprets `func` on `values`.
std::vector<rt::HostTensor>
run(const std::string &model, const std::string &pipeline,
    const std::string &func,
    const std::map<std::string, rt::HostTensor> &values) {
  return step::test::interpretAfter(model, pipeline, func, values).second;
}

TEST(Differential, AutodiffKeepsTheForwardLoss) {
  std::string model = mlpModel(8);
  auto values = mlpValues(8);
  auto before = run(model, "", "forward", values);
  auto after = run(model, "step-autodiff", "forward_backward", values);
  // The same forward ops compute the loss: bit-identical.
  ASSERT_EQ(after.size(), 4u); // loss + 3 gradients
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].getAsDouble(0), after[0].getAsDouble(0));
}

TEST(Differential, GradAccumEqualsOneBigBatch) {
  auto values = mlpValues(16);
  auto big = run(mlpModel(16), "step-autodiff", "forward_backward", values);
  auto accum = run(mlpModel(4), "step-autodiff,step-grad-accum{k=4}",
                   "forward_backward", values);
  ASSERT_EQ(big.size(), accum.size());
  for (size_t r = 0; r < big.size(); ++r)
    for (int64_t i = 0; i < big[r].numel(); ++i) {
      // Mean of 4 micro-batch means vs one mean over 16 rows: the same sum
      // in another order, so equal up to f32 rounding of O(10) terms.
      double a = big[r].getAsDouble(i), b = accum[r].getAsDouble(i);
      EXPECT_NEAR(a, b, 1e-6 * (1 + std::fabs(a)))
          << "result " << r << " #" << i;
    }
}

class MemoryPlanTest : public ::testing::TestWithParam<bool> {};

TEST_P(MemoryPlanTest, LiveValuesNeverShareBytes) {
  // The whole train step of the MLP (unfused, then fused), planned, then
  // checked by brute force: any two values alive at the same op index have
  // disjoint byte ranges.
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(mlpModel(8), &ctx);
  ASSERT_TRUE(module);
  TrainOptions t;
  t.clipNorm = 1.0;
  t.fuse = GetParam();
  ASSERT_TRUE(mlir::succeeded(buildTrainStep(*module, t)));
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::step::createMemoryPlan());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto f = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  struct Live {
    int64_t first, last, offset, bytes;
  };
  std::vector<Live> values;
  llvm::DenseMap<mlir::Operation *, int64_t> index;
  for (mlir::Operation &op : f.getBody().front())
    index[&op] = static_cast<int64_t>(index.size());
  for (mlir::Operation &op : f.getBody().front()) {
    auto offsets = op.getAttrOfType<mlir::DenseI64ArrayAttr>("step.offsets");
    if (!offsets)
      continue;
    for (auto [i, r] : llvm::enumerate(op.getResults())) {
      auto type = mlir::cast<mlir::RankedTensorType>(r.getType());
      Live l{index[&op], index[&op], offsets[i],
             type.getNumElements() *
                 std::max<int64_t>(1, type.getElementTypeBitWidth() / 8)};
      for (mlir::Operation *user : r.getUsers())
        l.last = std::max(l.last, index[user]);
      values.push_back(l);
    }
  }
  ASSERT_GT(values.size(), GetParam() ? 10u : 20u);
  int64_t peak = 0;
  for (size_t a = 0; a < values.size(); ++a) {
    peak = std::max(peak, values[a].offset + values[a].bytes);
    for (size_t b = a + 1; b < values.size(); ++b) {
      const Live &x = values[a], &y = values[b];
      bool together = x.first <= y.last && y.first <= x.last;
      bool disjoint = x.offset + x.bytes <= y.offset ||
                      y.offset + y.bytes <= x.offset;
      EXPECT_TRUE(!together || disjoint)
          << "values " << a << " and " << b << " overlap";
    }
  }
  EXPECT_EQ(f->getAttrOfType<mlir::IntegerAttr>("step.arena_bytes").getInt(),
            peak);
  EXPECT_LT(peak, f->getAttrOfType<mlir::IntegerAttr>(
                        "step.arena_bytes_no_reuse")
                      .getInt()); // reuse happened
}

INSTANTIATE_TEST_SUITE_P(Fuse, MemoryPlanTest, ::testing::Bool());

TEST(Trainer, ReportsMissingParamsAndInputs) {
  TrainOptions t;
  std::string model = unitGradientModel();
  try {
    Trainer trainer(model, t, {});
    ADD_FAILURE() << "expected rt::Error";
  } catch (const rt::Error &e) {
    EXPECT_STREQ(e.what(), "no initial value for param 'w'");
  }
  Trainer trainer(model, t, {{"w", rt::HostTensor(rt::DType::F32, {1})}});
  try {
    trainer.step({});
    ADD_FAILURE() << "expected rt::Error";
  } catch (const rt::Error &e) {
    EXPECT_STREQ(e.what(), "train step: no value for input 'x'");
  }
}

TEST(Trainer, RejectsAModelWithoutAScalarLoss) {
  std::string model = R"(
    func.func @forward(%w: tensor<2xf32> {step.kind = "param", step.name = "w"})
        -> tensor<2xf32> {
      return %w : tensor<2xf32>
    })";
  try {
    Trainer trainer(model, TrainOptions{},
                    {{"w", rt::HostTensor(rt::DType::F32, {2})}});
    ADD_FAILURE() << "expected rt::Error";
  } catch (const rt::Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "must return a scalar f32 loss (tensor<f32>) as its first "
                  "result, found 'tensor<2xf32>'"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
