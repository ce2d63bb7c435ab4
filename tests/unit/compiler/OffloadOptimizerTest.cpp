//===- OffloadOptimizerTest.cpp - ZeRO-Offload moves memory, not results --===//
//
// Differential tests of step-offload-optimizer (passes/OffloadOptimizer.cpp):
// the training step built with `offloadOptimizer` runs two updates on the
// reference interpreter and on the CPU backend next to the step built
// without it, and every result (loss, params, optimizer state) must be
// bit-identical: the update runs the same kernels, on the host, and the
// copies are copies. Tolerance: none.
//
// Besides, the artifact's plan is ZeRO-Offload's: every param and state
// buffer is in host memory (no device bytes), every update is a host step,
// the gradients cross to the host and the params back (the pass's figures
// against the plan's own copies), and no device step reads host memory
// (Plan::validate, run by planArtifact).
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include <gtest/gtest.h>

#include <iostream>

namespace {
using namespace step;
using namespace step::test;

struct OffloadOptimizerCase {
  const char *name;
  Model (*model)();
  const char *optimizer;
  const char *amp = "";
  const char *lossScale = "auto";
  void (*tweak)(TrainOptions &) = nullptr;
};
void PrintTo(const OffloadOptimizerCase &c, std::ostream *os) {
  *os << c.name;
}

TrainOptions optionsFor(const OffloadOptimizerCase &c, bool offload) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse(c.optimizer);
  t.clipNorm = 0.5;
  t.amp = AmpOptions::parse(c.amp, "", c.lossScale);
  if (c.tweak)
    c.tweak(t);
  t.offloadOptimizer = offload;
  return t;
}

bool holdsUpdate(const rt::PlanStep &s) {
  auto isUpdate = [](const std::string &op) {
    return op == "step.sgd_update" || op == "step.adamw_update" ||
           op == "step.lamb_update";
  };
  if (isUpdate(s.op))
    return true;
  if (s.body)
    for (const rt::PlanStep &inner : s.body->steps)
      if (isUpdate(inner.op))
        return true;
  return false;
}

class OffloadOptimizerDiff
    : public testing::TestWithParam<OffloadOptimizerCase> {};

TEST_P(OffloadOptimizerDiff, SameBitsWithTheUpdateOnTheHost) {
  const OffloadOptimizerCase &c = GetParam();
  Model model = c.model();
  auto ctx = makeContext();
  BuiltStep want = buildStep(ctx.get(), model, optionsFor(c, false));
  ASSERT_TRUE(want.module) << want.errors;
  BuiltStep got = buildStep(ctx.get(), model, optionsFor(c, true));
  ASSERT_TRUE(got.module) << got.errors;
  FuncOp f = want.step(), g = got.step();
  ASSERT_FALSE(f->hasAttr("step.offload_optimizer"));
  auto d = g->getAttrOfType<mlir::DictionaryAttr>("step.offload_optimizer");
  ASSERT_TRUE(d);

  std::optional<rt::Artifact> plain = planOrFail(*want.module, "train_step");
  std::optional<rt::Artifact> moved = planOrFail(*got.module, "train_step");
  ASSERT_TRUE(plain && moved);
  const rt::Plan &p = moved->plan;
  int64_t paramBytes = 0, stateBytes = 0, hostSteps = 0, updates = 0;
  int64_t outBytes = 0, inBytes = 0, outs = 0, ins = 0;
  for (const rt::BufferDesc &b : p.buffers)
    if (b.kind == rt::BufferKind::Param || b.kind == rt::BufferKind::State) {
      SCOPED_TRACE(b.name);
      EXPECT_TRUE(b.host);
      (b.kind == rt::BufferKind::Param ? paramBytes : stateBytes) += b.bytes();
    }
  for (const rt::PlanStep &s : p.steps) {
    hostSteps += s.host;
    if (holdsUpdate(s)) {
      EXPECT_TRUE(s.host) << s.op;
      ++updates;
    }
    if (s.op == "step.offload")
      ++outs, outBytes += p.buffers[s.results[0]].bytes();
    if (s.op == "step.reload")
      ++ins, inBytes += p.buffers[s.results[0]].bytes();
  }
  EXPECT_GT(updates, 0);
  EXPECT_EQ(BuiltStep::intOf(d, "host_ops"), hostSteps);
  EXPECT_EQ(BuiltStep::intOf(d, "updates"), updates);
  EXPECT_EQ(BuiltStep::intOf(d, "params_bytes"), paramBytes);
  EXPECT_EQ(BuiltStep::intOf(d, "state_bytes"), stateBytes);
  // step-offload's activation copies come in pairs.
  int64_t pairs = got.offload ? got.off("offloaded") : 0;
  int64_t pairBytes = got.offload ? got.off("offloaded_bytes") : 0;
  outs -= pairs, ins -= pairs, outBytes -= pairBytes, inBytes -= pairBytes;
  EXPECT_EQ(BuiltStep::intOf(d, "offloads"), outs);
  EXPECT_EQ(BuiltStep::intOf(d, "offloaded_bytes"), outBytes);
  EXPECT_EQ(BuiltStep::intOf(d, "reloads"), ins);
  EXPECT_EQ(BuiltStep::intOf(d, "reloaded_bytes"), inBytes);
  // ZeRO-Offload's traffic: at least every gradient out and every param
  // in; the host arena holds them. Under AMP a gradient made in 16 bits
  // goes out as such (step-fuse copies its cast to f32 into the update,
  // which runs on the host), so half a param's size at least.
  EXPECT_GE(outBytes, std::string(c.amp).empty() ? paramBytes : paramBytes / 2);
  EXPECT_GE(inBytes, paramBytes);
  // Nothing else of param size comes in: no optimizer state, no new param
  // (fp16's skip of a non-finite update runs on the host too); at most a
  // few scalars (the loss scale).
  EXPECT_LE(inBytes, paramBytes + 64);
  EXPECT_GT(p.hostBytes, 0);
  std::cout << "[offload-optimizer] " << c.name << ": params " << paramBytes
            << " B, state " << stateBytes << " B on the host; " << hostSteps
            << " host steps; out " << outBytes << " B, in " << inBytes
            << " B per step; arena " << plain->plan.arenaBytes << " -> "
            << p.arenaBytes << " B, host arena " << p.hostBytes << " B\n";

  expectSameUpdates(f, model, "interpreter", interpreterOf(f),
                    interpreterOf(g));
  expectSameUpdates(f, model, "CPU backend", cpuOf(plain), cpuOf(moved));
}

INSTANTIATE_TEST_SUITE_P(
    Models, OffloadOptimizerDiff,
    testing::Values(
        OffloadOptimizerCase{"MLP_AdamW", mlpModel, "adamw,lr=1e-2,wd=0.1"},
        OffloadOptimizerCase{"GPT2_AdamW", gpt2Default, "adamw,lr=1e-2"},
        OffloadOptimizerCase{"GPT2_Nesterov", gpt2Model,
                             "sgd,lr=0.1,momentum=0.9,nesterov=1,wd=0.01"},
        OffloadOptimizerCase{"MLP_Lamb", mlpModel, "lamb,lr=1e-2"},
        OffloadOptimizerCase{"GPT2_Bf16", gpt2Model, "adamw,lr=1e-2", "bf16"},
        // fp16's dynamic loss scale is state too; the skip of a
        // non-finite step selects between the old and new params.
        OffloadOptimizerCase{"MLP_Fp16", mlpModel, "adamw,lr=1e-2", "fp16",
                             "dynamic,init=1024"},
        OffloadOptimizerCase{
            "GPT2_Cosine_GradAccum2", gpt2Model, "adamw,lr=1e-2", "", "auto",
            [](TrainOptions &t) {
              t.schedule = ScheduleOptions::parse("cosine,warmup=1,total=4");
              t.gradAccum = 2;
            }},
        // Activation offloading and recomputation in the same step.
        OffloadOptimizerCase{"GPT2_RematMax_OffloadAll", gpt2Default,
                             "adamw,lr=1e-2", "", "auto",
                             [](TrainOptions &t) {
                               t.remat.mode = "max";
                               t.offload = OffloadOptions::parse("all");
                             }},
        OffloadOptimizerCase{"GPT2_NoFuse", gpt2Model, "adamw,lr=1e-2", "",
                             "auto", [](TrainOptions &t) { t.fuse = false; }}),
    [](const testing::TestParamInfo<OffloadOptimizerCase> &info) {
      return std::string(info.param.name);
    });

// A remat budget bounds the arena before the params' device copies move
// into it: the pipeline refuses the pair instead of missing the budget.
TEST(OffloadOptimizer, RefusesARematBudget) {
  Model model = mlpModel();
  auto ctx = makeContext();
  OffloadOptimizerCase c{"", mlpModel, "adamw"};
  TrainOptions t = optionsFor(c, true);
  t.remat.mode = "budget";
  t.remat.budget = 1 << 20;
  BuiltStep b = buildStep(ctx.get(), model, t);
  EXPECT_FALSE(b.module);
  EXPECT_NE(b.errors.find("cannot be combined with a remat budget"),
            std::string::npos)
      << b.errors;
}

} // namespace
