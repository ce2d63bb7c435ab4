//===- RematTest.cpp - step-remat changes memory, never a result ----------===//
//
// Differential tests of step-remat (passes/Remat.cpp): the training step
// built with each mode and with budgets is run for two updates on the
// reference interpreter and on the CPU backend next to the step built
// without recomputation, and every result (loss, params, optimizer state)
// must be bit-identical: a recomputed value is the same op on the same
// operands, and the CPU kernels are deterministic. Tolerance: none.
//
// Besides: the planned arena of the artifact is the peak the pass reports
// and never above a budget; a sweep of budgets gives recomputed FLOPs that
// grow as the budget shrinks; a budget below every choice is an error
// naming the smallest peak found; the greedy solver against the exact
// search on a model small enough for it; checkpoint scopes of the tracing
// API; the parsing of --remat and --remat-budget.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/ThreadPool.h"

#include <gtest/gtest.h>

#include <iostream>

namespace {
using namespace step;
using namespace step::test;

Model gpt2Hinted() { return gpt2Wide(true); }
Model gpt2Plain() { return gpt2Wide(false); }

using Built = BuiltStep;

TrainOptions optionsFor(const std::string &mode, int64_t budget = 0,
                        const std::string &amp = "") {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  t.clipNorm = 0.5;
  t.amp = AmpOptions::parse(amp, "", "auto");
  t.remat.mode = mode;
  t.remat.budget = budget;
  return t;
}

/// Two updates of `want` and `got` on the interpreter and on the CPU
/// backend, every result compared bit for bit.
void expectSameSteps(Built &want, Built &got, const Model &model) {
  FuncOp f = want.step(), g = got.step();
  expectSameUpdates(f, model, "interpreter", interpreterOf(f),
                    interpreterOf(g));
  std::optional<rt::Artifact> plain = planOrFail(*want.module, "train_step");
  std::optional<rt::Artifact> remat = planOrFail(*got.module, "train_step");
  ASSERT_TRUE(plain && remat);
  // The pass measured the plan the artifact gets without donation (the
  // updates in their buffers, decided after step-fuse): donation only
  // takes bytes out of the arena.
  if (got.remat) {
    std::optional<rt::Artifact> apart =
        planOrFail(*got.module, "train_step", /*donate=*/false);
    std::optional<rt::Artifact> plainApart =
        planOrFail(*want.module, "train_step", /*donate=*/false);
    ASSERT_TRUE(apart && plainApart);
    EXPECT_EQ(apart->plan.arenaBytes, got.get("peak_after"));
    EXPECT_EQ(plainApart->plan.arenaBytes, got.get("peak_before"));
    EXPECT_LE(remat->plan.arenaBytes, apart->plan.arenaBytes);
    EXPECT_LE(plain->plan.arenaBytes, plainApart->plan.arenaBytes);
  }
  expectSameUpdates(f, model, "CPU backend", cpuOf(plain), cpuOf(remat));
}

struct RematCase {
  const char *name;
  Model (*model)();
  const char *mode;
  /// mode budget: this fraction of the peak without recomputation.
  double budgetFraction;
  const char *amp;
  bool recomputes; ///< whether some op must be recomputed
};
void PrintTo(const RematCase &c, std::ostream *os) { *os << c.name; }

class RematDiff : public testing::TestWithParam<RematCase> {};

TEST_P(RematDiff, SameBitsAsWithoutRecomputation) {
  const RematCase &c = GetParam();
  Model model = c.model();
  auto ctx = makeContext();
  Built want = buildStep(ctx.get(), model, optionsFor("none", 0, c.amp),
                     /*ignoreScopes=*/true);
  ASSERT_FALSE(want.remat);
  ASSERT_TRUE(want.module) << want.errors;
  int64_t budget = 0;
  if (std::string(c.mode) == "budget") {
    Built probe = buildStep(ctx.get(), model, optionsFor("auto", 0, c.amp));
    ASSERT_TRUE(probe.module) << probe.errors;
    budget = static_cast<int64_t>(
        c.budgetFraction * static_cast<double>(probe.get("peak_before")));
  }
  Built got = buildStep(ctx.get(), model, optionsFor(c.mode, budget, c.amp));
  ASSERT_TRUE(got.module) << got.errors;
  ASSERT_TRUE(got.remat);
  std::cout << "[remat] " << c.name << ": peak " << got.get("peak_before")
            << " -> " << got.get("peak_after") << " B, "
            << got.get("recomputed_ops") << " ops recomputed ("
            << got.get("recomputed_flops") << " of " << got.get("step_flops")
            << " FLOPs), " << got.get("segments_recomputed") << "/"
            << got.get("segments") << " segments, group " << got.get("group")
            << "\n";
  if (budget > 0) {
    EXPECT_LE(got.get("peak_after"), budget);
  }
  if (c.recomputes) {
    EXPECT_GT(got.get("recomputed_ops"), 0);
  }
  EXPECT_LE(got.get("peak_after"), got.get("peak_before"));
  expectSameSteps(want, got, model);
}

INSTANTIATE_TEST_SUITE_P(
    Models, RematDiff,
    testing::Values(
        RematCase{"MLP_Auto", mlpModel, "auto", 0, "", false},
        RematCase{"MLP_Max", mlpModel, "max", 0, "", false},
        RematCase{"GPT2Tiny_Max", gpt2Model, "max", 0, "", true},
        RematCase{"GPT2_Auto", gpt2Plain, "auto", 0, "", true},
        RematCase{"GPT2_Max", gpt2Plain, "max", 0, "", true},
        RematCase{"GPT2_Budget80", gpt2Plain, "budget", 0.8, "", true},
        RematCase{"GPT2_Budget60", gpt2Plain, "budget", 0.6, "", true},
        RematCase{"GPT2_Max_Bf16", gpt2Plain, "max", 0, "bf16", true},
        RematCase{"GPT2_CheckpointScopes", gpt2Hinted, "none", 0, "", true},
        RematCase{"GPT2_CheckpointScopes_Max", gpt2Hinted, "max", 0, "", true}),
    [](const testing::TestParamInfo<RematCase> &info) {
      return std::string(info.param.name);
    });

// Budgets from the peak without recomputation down to max's: every plan
// fits its budget, and the recomputed FLOPs never fall as the budget
// shrinks (the memory/FLOPs curve of docs/remat.md is monotone).
TEST(RematBudget, ShrinkingBudgetsNeverRecomputeLess) {
  Model model = gpt2Plain();
  auto ctx = makeContext();
  Built low = buildStep(ctx.get(), model, optionsFor("max"));
  ASSERT_TRUE(low.module) << low.errors;
  int64_t high = low.get("peak_before"), floor = low.get("peak_after");
  ASSERT_LT(floor, high);
  int64_t lastFlops = -1;
  for (int i = 0; i <= 6; ++i) {
    int64_t budget = high - (high - floor) * i / 6;
    Built b = buildStep(ctx.get(), model, optionsFor("budget", budget));
    ASSERT_TRUE(b.module) << "budget " << budget << ": " << b.errors;
    std::optional<rt::Artifact> a = planOrFail(*b.module, "train_step");
    ASSERT_TRUE(a);
    EXPECT_LE(a->plan.arenaBytes, budget);
    int64_t flops = b.get("recomputed_flops");
    std::cout << "[remat-sweep] budget " << budget << ": peak "
              << a->plan.arenaBytes << ", recomputed FLOPs " << flops << "\n";
    EXPECT_GE(flops, lastFlops) << "budget " << budget;
    lastFlops = flops;
  }
}

TEST(RematBudget, BelowEveryChoiceIsAnErrorNamingTheSmallestPeak) {
  Model model = gpt2Plain();
  auto ctx = makeContext();
  Built b = buildStep(ctx.get(), model, optionsFor("budget", 1000));
  EXPECT_FALSE(b.module);
  EXPECT_NE(b.errors.find("step-remat: no plan fits the budget of 1000 "
                          "bytes: the smallest planned peak found is "),
            std::string::npos)
      << b.errors;
  EXPECT_NE(b.errors.find("without recomputation: "), std::string::npos)
      << b.errors;
}

/// Runs `pipeline` on a copy of `base`; the step.remat of its train step.
mlir::DictionaryAttr runRemat(ModuleOp base, const std::string &pipeline,
                              OwningOpRef<ModuleOp> &copy) {
  copy = base.clone();
  mlir::ScopedDiagnosticHandler quiet(
      base.getContext(), [](mlir::Diagnostic &d) {
        std::cout << "[remat] " << d.str() << "\n";
        return mlir::success();
      });
  mlir::PassManager pm(base.getContext());
  EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pipeline, pm)));
  if (mlir::failed(pm.run(*copy)))
    return nullptr;
  return copy->lookupSymbol<FuncOp>("train_step")
      ->getAttrOfType<mlir::DictionaryAttr>("step.remat");
}

int64_t intOf(mlir::DictionaryAttr d, const char *key) {
  return d.getAs<mlir::IntegerAttr>(key).getInt();
}

// The greedy solver (used past exact-limit candidate segments) against the
// exact search over every subset, on the 7 segments of a 2-layer gpt2Wide:
// the exact choice never recomputes more, and the gap is printed
// (docs/remat.md quotes it). The layer norms stay ops (no
// step-layer-norm-stats): written out they make 10 segments, whose exact
// search takes 30 s.
TEST(RematSolver, GreedyAgainstExactSearch) {
  Model model = gpt2Wide(false, 2);
  auto ctx = makeContext();
  TrainOptions t = optionsFor("none");
  t.fuse = false;
  t.layerNormStats = false;
  Built base = buildStep(ctx.get(), model, t);
  ASSERT_TRUE(base.module) << base.errors;
  OwningOpRef<ModuleOp> copy;
  auto max = runRemat(*base.module, "step-remat{mode=max exact-limit=0}", copy);
  ASSERT_TRUE(max);
  int64_t high = intOf(max, "peak_before"), floor = intOf(max, "peak_after");
  for (int i = 1; i <= 4; ++i) {
    int64_t budget = high - (high - floor) * i / 4;
    std::string opts = "mode=budget budget=" + std::to_string(budget);
    auto greedy =
        runRemat(*base.module, "step-remat{" + opts + " exact-limit=0}", copy);
    auto exact =
        runRemat(*base.module, "step-remat{" + opts + " exact-limit=8}", copy);
    ASSERT_TRUE(greedy) << "greedy, budget " << budget;
    ASSERT_TRUE(exact) << "exact, budget " << budget;
    EXPECT_EQ(intOf(exact, "segments"), 7);
    EXPECT_LE(intOf(greedy, "peak_after"), budget);
    EXPECT_LE(intOf(exact, "peak_after"), budget);
    int64_t g = intOf(greedy, "recomputed_flops"),
            e = intOf(exact, "recomputed_flops");
    EXPECT_LE(e, g) << "budget " << budget;
    std::cout << "[remat-gap] budget " << budget << ": greedy " << g
              << " FLOPs, exact " << e << " FLOPs, gap "
              << (e > 0 ? static_cast<double>(g - e) / static_cast<double>(e)
                        : 0.0)
              << "\n";
  }
}

// The search measures choices on the context's threads, ahead of the order
// a one-at-a-time search takes them in (passes/Remat.cpp, measureAll), and
// records only those it would have taken: the step is the same on one
// thread and on four (more than these 2-core machines have), for the greedy
// search (max and two budgets, whose prunes measure drops four at a time)
// and the exact one.
TEST(RematSolver, SameStepOnOneThreadAndOnFour) {
  llvm::StdThreadPool pool(llvm::hardware_concurrency(4));
  auto ctx = makeContext(); // one thread
  TrainOptions t = optionsFor("none");
  t.fuse = false;
  t.layerNormStats = false;
  Built two = buildStep(ctx.get(), gpt2Wide(false, 2), t);
  Built one = buildStep(ctx.get(), gpt2Wide(false, 1), t);
  ASSERT_TRUE(two.module && one.module) << two.errors << one.errors;
  OwningOpRef<ModuleOp> copy;
  auto max = runRemat(*two.module, "step-remat{mode=max exact-limit=0}", copy);
  ASSERT_TRUE(max);
  int64_t high = intOf(max, "peak_before"), floor = intOf(max, "peak_after");
  auto budget = [&](int64_t i, const char *limit) {
    return "step-remat{mode=budget budget=" +
           std::to_string(high - (high - floor) * i / 3) +
           " exact-limit=" + limit + "}";
  };
  std::vector<std::pair<ModuleOp, std::string>> runs = {
      {*two.module, "step-remat{mode=max exact-limit=0}"},
      {*two.module, budget(2, "0")},
      {*two.module, budget(3, "0")},
      {*one.module, "step-remat{mode=max exact-limit=8}"}};
  auto text = [](ModuleOp m) {
    std::string s;
    llvm::raw_string_ostream os(s);
    m.print(os);
    return s;
  };
  std::vector<std::string> serial;
  for (auto &[base, pipeline] : runs) {
    ASSERT_TRUE(runRemat(base, pipeline, copy)) << pipeline;
    serial.push_back(text(*copy));
  }
  ctx->setThreadPool(pool);
  ASSERT_TRUE(ctx->isMultithreadingEnabled());
  for (size_t i = 0; i < runs.size(); ++i) {
    mlir::DictionaryAttr remat = runRemat(runs[i].first, runs[i].second, copy);
    ASSERT_TRUE(remat) << runs[i].second;
    EXPECT_EQ(text(*copy), serial[i]) << runs[i].second;
    std::cout << "[remat-threads] " << runs[i].second << ": "
              << intOf(remat, "segments_recomputed") << " of "
              << intOf(remat, "segments") << " segments, group "
              << intOf(remat, "group") << "\n";
  }
  ctx->disableMultithreading();
}

// Without a solver (mode none), only what checkpoint scopes mark is
// recomputed: every recomputed op was traced inside a scope, and the
// backward keeps fewer bytes.
TEST(RematHints, CheckpointScopesAloneAreRecomputed) {
  Model model = gpt2Hinted();
  auto ctx = makeContext();
  TrainOptions t = optionsFor("none");
  t.fuse = false; // the clones stay visible as ops of their own
  Built b = buildStep(ctx.get(), model, t);
  ASSERT_TRUE(b.module) << b.errors;
  ASSERT_TRUE(b.remat) << "step-remat did not run for the scopes";
  EXPECT_LT(b.get("saved_bytes_after"), b.get("saved_bytes_before"));
  int64_t recomputed = 0;
  b.step().walk([&](mlir::Operation *op) {
    if (!op->hasAttr("step.recomputed"))
      return;
    ++recomputed;
    EXPECT_TRUE(op->hasAttr("step.checkpoint"))
        << "recomputed outside a scope: " << op->getName().getStringRef().str();
  });
  EXPECT_GT(recomputed, 0);
  EXPECT_EQ(recomputed, b.get("recomputed_ops"));
  // The same model without scopes: nothing runs.
  Built plain = buildStep(ctx.get(), gpt2Plain(), t);
  ASSERT_TRUE(plain.module);
  EXPECT_FALSE(plain.remat);
}

TEST(RematOptionsTest, ParsesModesAndByteCounts) {
  EXPECT_EQ(RematOptions::parse("", "").mode, "none");
  EXPECT_EQ(RematOptions::parse("max", "").mode, "max");
  RematOptions r = RematOptions::parse("", "2GiB");
  EXPECT_EQ(r.mode, "budget");
  EXPECT_EQ(r.budget, int64_t(2) << 30);
  EXPECT_EQ(RematOptions::parse("", "1.5e9").budget, 1500000000);
  EXPECT_EQ(RematOptions::parse("", "12K").budget, 12000);
  EXPECT_EQ(RematOptions::parse("none", "64MiB").budget, int64_t(64) << 20);
  auto message = [](const std::string &mode, const std::string &budget) {
    try {
      RematOptions::parse(mode, budget);
    } catch (const std::invalid_argument &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("most", ""),
            "--remat: unknown mode 'most', expected none, auto or max");
  EXPECT_EQ(message("max", "1G"),
            "--remat=max and --remat-budget exclude each other: a budget is "
            "its own mode");
  EXPECT_NE(message("", "lots").find("--remat-budget"), std::string::npos);
  EXPECT_NE(message("", "0").find("is not a positive byte count"),
            std::string::npos);
  EXPECT_NE(message("", "-5MiB").find("is not a positive byte count"),
            std::string::npos);
}

} // namespace
