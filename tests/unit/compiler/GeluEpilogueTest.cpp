//===- GeluEpilogueTest.cpp - step-fuse's gelu-epilogues on GPT-2 ---------===//
//
// With gelu-epilogues (passes/Fuse.cpp, phase 1), GPT-2's MLP forward
// becomes one matmul fusion yielding GELU's input and output (cuBLASLt's
// GELU_AUX_BIAS) and its backward one yielding GELU's gradient and the
// bias gradient (DGELU_BGRAD). Checked here without a GPU: the training
// step built with the option gives the unfused step's bits on the
// interpreter and the CPU backend (f32 and bf16 AMP, two updates); every
// matmul fusion of the planned artifact is one the CUDA backend reads as a
// cuBLASLt call (runtime/cuda/MatmulEpilogue.h), with one GELU_AUX_BIAS and
// one DGELU_BGRAD per layer; no bare gelu or gelu_grad is left; and
// without the option none of those epilogues appears.
//
//===----------------------------------------------------------------------===//
#include "TrainStepTestUtil.h"

#include "compiler/pipeline/PlanBuilder.h"
#include "compiler/pipeline/Train.h"
#include "dialects/step/StepOps.h"
#include "runtime/cuda/MatmulEpilogue.h"

#include <gtest/gtest.h>

#include <map>

namespace {
using namespace step;
using namespace step::test;
using rt::cuda::MatmulEpilogue;

constexpr int64_t kLayers = 2; // gpt2Model's

/// The planned step's matmul fusions by epilogue, each read as the CUDA
/// backend reads it.
std::map<MatmulEpilogue, int> epilogues(const rt::Artifact &a) {
  std::map<MatmulEpilogue, int> n;
  for (const rt::PlanStep &s : a.plan.steps)
    if (rt::cuda::isMatmulFusion(s)) {
      rt::cuda::FusedMatmul f =
          rt::cuda::readMatmulFusion(s, "plan step " + s.kernel);
      ++n[f.epilogue];
    }
  return n;
}

class GeluEpilogues : public testing::TestWithParam<const char *> {};

TEST_P(GeluEpilogues, SameBitsAndOneCuBlasLtCallEachWay) {
  const char *amp = GetParam();
  Model model = gpt2Model();
  auto ctx = makeContext();
  auto build = [&](bool fuse, bool gelu) {
    TrainOptions t;
    t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
    t.clipNorm = 0.5;
    t.amp = AmpOptions::parse(amp, "", "auto");
    t.fuse = fuse;
    t.geluEpilogues = gelu;
    BuiltStep b = buildStep(ctx.get(), model, t);
    EXPECT_TRUE(b.module) << b.errors;
    return std::move(b.module);
  };
  OwningOpRef<ModuleOp> ref = build(false, false), plain = build(true, false),
                        gelu = build(true, true);
  ASSERT_TRUE(ref && plain && gelu);
  FuncOp f = ref->lookupSymbol<FuncOp>("train_step");
  FuncOp g = gelu->lookupSymbol<FuncOp>("train_step");
  ASSERT_TRUE(f && g);
  int64_t bare = 0;
  for (mlir::Operation &op : g.getBody().front())
    bare += mlir::isa<mlir::step::GeluOp, mlir::step::GeluGradOp>(op);
  EXPECT_EQ(bare, 0);

  expectSameUpdates(f, model, "interpreter", interpreterOf(f),
                    interpreterOf(g));
  std::optional<rt::Artifact> unfused = planOrFail(*ref, "train_step");
  std::optional<rt::Artifact> folded = planOrFail(*gelu, "train_step");
  std::optional<rt::Artifact> without = planOrFail(*plain, "train_step");
  ASSERT_TRUE(unfused && folded && without);
  expectSameUpdates(f, model, "CPU backend", cpuOf(unfused), cpuOf(folded));

  std::map<MatmulEpilogue, int> on = epilogues(*folded);
  EXPECT_EQ(on[MatmulEpilogue::GeluAuxBias], kLayers);
  EXPECT_EQ(on[MatmulEpilogue::DGeluBgrad], kLayers);
  std::map<MatmulEpilogue, int> off = epilogues(*without);
  EXPECT_EQ(off[MatmulEpilogue::GeluAuxBias], 0);
  EXPECT_EQ(off[MatmulEpilogue::DGeluBgrad], 0);
  // The MLP's first matmul is GELU_AUX_BIAS instead of a bias epilogue;
  // the other matmul fusions (q/k/v, projections) are the same either way.
  EXPECT_EQ(on[MatmulEpilogue::Bias] + kLayers, off[MatmulEpilogue::Bias]);
  // Two fewer launches per layer: GELU's forward and its backward kernels.
  EXPECT_EQ(rt::launchCount(folded->plan),
            rt::launchCount(without->plan) - 2 * kLayers);
}

INSTANTIATE_TEST_SUITE_P(Gpt2, GeluEpilogues, testing::Values("", "bf16"),
                         [](const testing::TestParamInfo<const char *> &i) {
                           return std::string(*i.param ? i.param : "f32");
                         });

} // namespace
