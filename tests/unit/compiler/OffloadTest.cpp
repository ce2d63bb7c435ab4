//===- OffloadTest.cpp - step-offload changes memory, never a result ------===//
//
// Differential tests of step-offload (passes/Offload.cpp): the training
// step built with offloading (alone, after --remat=max, and before the
// segment search of a remat budget) runs two updates on the reference interpreter and on the CPU
// backend next to the step built without either, and every result (loss,
// params, optimizer state) must be bit-identical: offload and reload are
// copies. Tolerance: none. The CPU backend keeps host and device arenas
// apart, so a host plan that lets two live host values share bytes would
// change a result here.
//
// Besides: the artifact's arena and host arena are what the pass
// reported; the planned peak falls when something is offloaded; `auto`
// offloads nothing a copy cannot hide on a fast device and something on a
// slow one; the parsing of --offload.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <iostream>

namespace {
using namespace step;
using namespace step::test;

/// gpt2Wide with a context of 64: after --remat=max, gpt2Wide's own
/// (context 32) step peaks where no offload lowers the arena.
Model gpt2LongContext() {
  gpt2::GPT2Config cfg;
  cfg.vocab = 64, cfg.context = 64, cfg.layers = 3, cfg.heads = 2,
  cfg.width = 16, cfg.batch = 4;
  return tracedGPT2(cfg, 7);
}

using Built = BuiltStep;

TrainOptions optionsFor(const std::string &offload, const std::string &remat,
                        const std::string &amp = "", int64_t budget = 0) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  t.clipNorm = 0.5;
  t.amp = AmpOptions::parse(amp, "", "auto");
  t.remat.mode = remat;
  t.remat.budget = budget;
  t.offload = OffloadOptions::parse(offload);
  return t;
}

struct OffloadCase {
  const char *name;
  Model (*model)();
  const char *offload, *remat, *amp;
  bool offloads; ///< whether something must be offloaded
  /// remat budget: this fraction of the peak without either pass.
  double budgetFraction = 0;
};
void PrintTo(const OffloadCase &c, std::ostream *os) { *os << c.name; }

class OffloadDiff : public testing::TestWithParam<OffloadCase> {};

TEST_P(OffloadDiff, SameBitsAsOnTheDevice) {
  const OffloadCase &c = GetParam();
  Model model = c.model();
  auto ctx = makeContext();
  Built want = buildStep(ctx.get(), model, optionsFor("none", "none", c.amp));
  ASSERT_TRUE(want.module) << want.errors;
  ASSERT_FALSE(want.offload);
  int64_t budget = 0;
  if (c.budgetFraction > 0) {
    Built probe = buildStep(ctx.get(), model, optionsFor("all", "none", c.amp));
    ASSERT_TRUE(probe.module) << probe.errors;
    budget = static_cast<int64_t>(c.budgetFraction *
                                  static_cast<double>(probe.off("peak_before")));
  }
  Built got =
      buildStep(ctx.get(), model, optionsFor(c.offload, c.remat, c.amp, budget));
  ASSERT_TRUE(got.module) << got.errors;
  ASSERT_TRUE(got.offload);
  std::cout << "[offload] " << c.name << ": " << got.off("offloaded") << "/"
            << got.off("candidates") << " values, "
            << got.off("offloaded_bytes") << " B; peak "
            << got.off("peak_before") << " -> " << got.off("peak_after")
            << " B; host arena " << got.off("host_bytes") << " B\n";
  if (c.offloads) {
    EXPECT_GT(got.off("offloaded"), 0);
    EXPECT_LT(got.off("peak_after"), got.off("peak_before"));
  }
  EXPECT_LE(got.off("peak_after"), got.off("peak_before"));

  FuncOp f = want.step(), g = got.step();
  expectSameUpdates(f, model, "interpreter", interpreterOf(f),
                    interpreterOf(g));
  std::optional<rt::Artifact> plain = planOrFail(*want.module, "train_step");
  std::optional<rt::Artifact> moved = planOrFail(*got.module, "train_step");
  ASSERT_TRUE(plain && moved);
  // The plans the passes measured are the artifact's without donation
  // (which only takes bytes out of the arena): the last pass's
  // (step-remat's segment search runs last only with a budget it meets
  // after offloading).
  std::optional<rt::Artifact> apart =
      planOrFail(*got.module, "train_step", /*donate=*/false);
  ASSERT_TRUE(apart);
  EXPECT_LE(moved->plan.arenaBytes, apart->plan.arenaBytes);
  EXPECT_EQ(moved->plan.hostBytes, got.off("host_bytes"));
  if (budget > 0) {
    EXPECT_LE(moved->plan.arenaBytes, budget);
    EXPECT_TRUE(apart->plan.arenaBytes == got.off("peak_after") ||
                apart->plan.arenaBytes ==
                    Built::intOf(got.remat, "peak_after"));
  } else {
    EXPECT_EQ(apart->plan.arenaBytes, got.off("peak_after"));
  }
  int64_t copies = 0;
  for (const rt::PlanStep &s : moved->plan.steps)
    copies += s.op == "step.offload" || s.op == "step.reload";
  EXPECT_EQ(copies, 2 * got.off("offloaded"));
  expectSameUpdates(f, model, "CPU backend", cpuOf(plain), cpuOf(moved));
}

INSTANTIATE_TEST_SUITE_P(
    Models, OffloadDiff,
    testing::Values(
        OffloadCase{"MLP_All", mlpModel, "all", "none", "", false},
        OffloadCase{"GPT2Tiny_All", gpt2Model, "all", "none", "", false},
        OffloadCase{"GPT2_All", gpt2Default, "all", "none", "", true},
        OffloadCase{"GPT2_All_Bf16", gpt2Default, "all", "none", "bf16", true},
        // A slow device (1 MFLOP/s) with a fast link hides every copy.
        OffloadCase{"GPT2_Auto_SlowDevice", gpt2Default,
                    "auto,flops=1e6,hbm=1e9,link=1e12", "none", "", true},
        // Both passes rewrite the same step: after --remat=max, and before
        // the segment search of a budget.
        OffloadCase{"GPT2_Remat_Max_Then_Auto", gpt2LongContext,
                    "auto,flops=1e6,hbm=1e9,link=1e12", "max", "", true},
        OffloadCase{"GPT2_Remat_Max_Then_All", gpt2LongContext, "all", "max",
                    "", true},
        OffloadCase{"GPT2_Auto_Then_Remat_Budget60", gpt2Default,
                    "auto,flops=1e6,hbm=1e9,link=1e12", "budget", "", true,
                    0.6}),
    [](const testing::TestParamInfo<OffloadCase> &info) {
      return std::string(info.param.name);
    });

// On the default machine (200 TFLOP/s, 25 GB/s) the tiny GPT-2's ops take
// nanoseconds and a copy at least 5 us: auto hides nothing and offloads
// nothing, while all offloads and reports the exposed time.
TEST(OffloadAuto, NothingOnAFastDeviceForTinyOps) {
  Model model = gpt2Wide();
  auto ctx = makeContext();
  Built autoBuilt = buildStep(ctx.get(), model, optionsFor("auto", "none"));
  ASSERT_TRUE(autoBuilt.module) << autoBuilt.errors;
  EXPECT_EQ(autoBuilt.off("offloaded"), 0);
  EXPECT_EQ(autoBuilt.off("peak_after"), autoBuilt.off("peak_before"));
  Built all = buildStep(ctx.get(), model, optionsFor("all", "none"));
  ASSERT_TRUE(all.module) << all.errors;
  EXPECT_GT(all.off("candidates"), 0); // there was something to move
  EXPECT_GT(all.off("offloaded"), 0);
  auto exposed = all.offload.getAs<mlir::FloatAttr>("exposed_seconds");
  ASSERT_TRUE(exposed);
  EXPECT_GT(exposed.getValueAsDouble(), 0);
}

// Adding --offload never makes a budget that recomputation alone meets
// infeasible: at the tightest such budget (--remat=max's peak) the
// pipeline meets it offloading first or, failing that, recomputing first.
TEST(OffloadBudget, NeverWorseThanRecomputationAlone) {
  Model model = gpt2Wide();
  auto ctx = makeContext();
  Built max = buildStep(ctx.get(), model, optionsFor("none", "max"));
  ASSERT_TRUE(max.module) << max.errors;
  int64_t budget = Built::intOf(max.remat, "peak_after");
  for (const char *spec : {"all", "auto,flops=1e8,hbm=1e9,link=1e9", "auto"}) {
    SCOPED_TRACE(spec);
    Built b = buildStep(ctx.get(), model, optionsFor(spec, "budget", "", budget));
    ASSERT_TRUE(b.module) << b.errors;
    std::optional<rt::Artifact> a = planOrFail(*b.module, "train_step");
    ASSERT_TRUE(a);
    EXPECT_LE(a->plan.arenaBytes, budget);
  }
}

// Where offloading first cannot meet a budget, recomputation goes first.
// GPT-2 small's shapes (bf16, B8, T1024; compiled, never run, so no
// params): offloading before the segment search meets 2.2 GB but not
// 2.0 GB (docs/remat.md), so a 2.0 GB budget needs the other order:
// step-remat meets it, then step-offload lowers the peak further.
TEST(OffloadBudget, FallsBackToRecomputationFirst) {
  using namespace step::trace;
  gpt2::GPT2Config cfg;
  cfg.vocab = 50304, cfg.context = 1024, cfg.layers = 12, cfg.heads = 12,
  cfg.width = 768, cfg.batch = 8;
  Graph g(1);
  Tensor tokens = g.input("tokens", {cfg.batch, cfg.context}, DType::I64);
  Tensor targets = g.input("targets", {cfg.batch, cfg.context}, DType::I64);
  g.output(gpt2::buildGPT2(g, cfg, tokens, targets));
  Model model{g.mlir(), {}, cfg.vocab};
  auto ctx = makeContext();
  const int64_t budget = 2'000'000'000;
  // AdamW without clipping, as stepc's default (clipping keeps every
  // gradient until the norm is known, which raises the floor).
  TrainOptions t = optionsFor("auto", "budget", "bf16", budget);
  t.clipNorm.reset();
  Built b = buildStep(ctx.get(), model, t);
  ASSERT_TRUE(b.module) << b.errors;
  // The attempt that offloaded first and missed the budget is one record of
  // its time (stepc --report), before the passes of the order kept.
  auto attempt = b.recordsOf("offload-first-attempt");
  ASSERT_EQ(attempt.size(), 1u);
  EXPECT_GT(attempt[0]->seconds, 0);
  auto remat = b.recordsOf("step-remat");
  ASSERT_EQ(remat.size(), 1u);
  EXPECT_LT(attempt[0], remat[0]);
  // step-remat ran first and met the budget alone; step-offload started
  // from its plan.
  EXPECT_LE(Built::intOf(b.remat, "peak_after"), budget);
  EXPECT_EQ(b.off("peak_before"), Built::intOf(b.remat, "peak_after"));
  EXPECT_GT(b.off("offloaded"), 0);
  EXPECT_LT(b.off("peak_after"), b.off("peak_before"));
}

TEST(OffloadOptions, Parse) {
  OffloadOptions o = OffloadOptions::parse(
      "auto,link=5e10,flops=1e15,hbm=3e12,max_exposed=0.05,min_bytes=4096");
  EXPECT_EQ(o.mode, "auto");
  EXPECT_EQ(o.linkBandwidth, 5e10);
  EXPECT_EQ(o.deviceFlops, 1e15);
  EXPECT_EQ(o.memoryBandwidth, 3e12);
  EXPECT_EQ(o.maxExposed, 0.05);
  EXPECT_EQ(o.minBytes, 4096);
  EXPECT_EQ(OffloadOptions::parse("").mode, "none");
  auto error = [](const std::string &spec) {
    try {
      OffloadOptions::parse(spec);
    } catch (const std::invalid_argument &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("most"),
            "--offload: unknown mode 'most', expected none, auto or all");
  EXPECT_EQ(error("auto,speed=1"),
            "--offload: unknown key 'speed', expected link, flops, hbm, "
            "max_exposed or min_bytes");
  EXPECT_EQ(error("auto,link=0"), "--offload: link = 0 must be positive");
  EXPECT_EQ(error("auto,link=fast"), "--offload: link=fast is not a number");
}

} // namespace
