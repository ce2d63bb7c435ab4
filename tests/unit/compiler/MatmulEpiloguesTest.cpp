//===- MatmulEpiloguesTest.cpp - GPT-2 with the opt-in cuBLASLt epilogues -===//
//
// The two epilogue options that have not yet run on a GPU, on the GPT-2
// training step, checked here without one:
//  - gelu-epilogues (passes/Fuse.cpp, phase 1): the MLP forward becomes
//    one matmul fusion yielding GELU's input and output (cuBLASLt's
//    GELU_AUX_BIAS) and its backward one yielding GELU's gradient and the
//    bias gradient (DGELU_BGRAD); no bare gelu or gelu_grad is left;
//  - bgrad-epilogues (passes/FuseBiasGrad.cpp): the q/k/v bias gradient,
//    the one bias sum no kernel computes on the way, joins the q/k/v
//    weight gradient's matmul (BGRADA) and its kernel is gone.
// Each way, and both together: the training step gives the unfused step's
// bits on the interpreter and the CPU backend (f32 and bf16 AMP, two
// updates); every matmul fusion of the planned artifact is one the CUDA
// backend reads as a cuBLASLt call (runtime/cuda/MatmulEpilogue.h), with
// one such epilogue per layer and none without the option.
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

/// GPT-2's training step, built the reference way (unfused) and fused
/// without and with the epilogue options; `f32` or "bf16" AMP.
class Gpt2Steps : public testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    ref = build(false, false, false);
    plain = build(true, false, false);
    ASSERT_TRUE(ref && plain);
    unfused = planOrFail(*ref, "train_step");
    without = planOrFail(*plain, "train_step");
    ASSERT_TRUE(unfused && without);
  }

  OwningOpRef<ModuleOp> build(bool fuse, bool gelu, bool bgrad) {
    TrainOptions t;
    t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
    t.clipNorm = 0.5;
    t.amp = AmpOptions::parse(GetParam(), "", "auto");
    t.fuse = fuse;
    t.geluEpilogues = gelu;
    t.bgradEpilogues = bgrad;
    BuiltStep b = buildStep(ctx.get(), model, t);
    EXPECT_TRUE(b.module) << b.errors;
    return std::move(b.module);
  }

  /// `m` updates as the unfused step does on the interpreter and the CPU
  /// backend; returns its planned artifact.
  std::optional<rt::Artifact> expectSameBits(ModuleOp m) {
    FuncOp f = ref->lookupSymbol<FuncOp>("train_step");
    FuncOp g = m.lookupSymbol<FuncOp>("train_step");
    EXPECT_TRUE(f && g);
    if (!f || !g)
      return std::nullopt;
    expectSameUpdates(f, model, "interpreter", interpreterOf(f),
                      interpreterOf(g));
    std::optional<rt::Artifact> a = planOrFail(m, "train_step");
    if (a)
      expectSameUpdates(f, model, "CPU backend", cpuOf(unfused), cpuOf(a));
    return a;
  }

  Model model = gpt2Model();
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
  OwningOpRef<ModuleOp> ref, plain;
  std::optional<rt::Artifact> unfused, without;
};

TEST_P(Gpt2Steps, GeluEpiloguesSameBitsAndOneCuBlasLtCallEachWay) {
  OwningOpRef<ModuleOp> gelu = build(true, true, false);
  ASSERT_TRUE(gelu);
  FuncOp g = gelu->lookupSymbol<FuncOp>("train_step");
  ASSERT_TRUE(g);
  int64_t bare = 0;
  for (mlir::Operation &op : g.getBody().front())
    bare += mlir::isa<mlir::step::GeluOp, mlir::step::GeluGradOp>(op);
  EXPECT_EQ(bare, 0);
  std::optional<rt::Artifact> folded = expectSameBits(*gelu);
  ASSERT_TRUE(folded);

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

TEST_P(Gpt2Steps, BgradEpiloguesTakeTheQkvBiasGradientAlone) {
  OwningOpRef<ModuleOp> bgrad = build(true, false, true);
  ASSERT_TRUE(bgrad);
  std::optional<rt::Artifact> folded = expectSameBits(*bgrad);
  ASSERT_TRUE(folded);
  std::map<MatmulEpilogue, int> on = epilogues(*folded);
  std::map<MatmulEpilogue, int> off = epilogues(*without);
  // The q/k/v weight gradient sums its rhs, the [B*T, 3C] gradient; the
  // projections' and the MLP's bias sums stay in their kernels.
  EXPECT_EQ(on[MatmulEpilogue::BgradA], kLayers);
  EXPECT_EQ(on[MatmulEpilogue::BgradB], 0);
  EXPECT_EQ(off[MatmulEpilogue::BgradA], 0);
  // One fewer launch per layer: the q/k/v bias gradient's reduction.
  EXPECT_EQ(rt::launchCount(folded->plan),
            rt::launchCount(without->plan) - kLayers);
}

TEST_P(Gpt2Steps, BothEpilogueOptionsTogether) {
  OwningOpRef<ModuleOp> both = build(true, true, true);
  ASSERT_TRUE(both);
  std::optional<rt::Artifact> folded = expectSameBits(*both);
  ASSERT_TRUE(folded);
  std::map<MatmulEpilogue, int> on = epilogues(*folded);
  EXPECT_EQ(on[MatmulEpilogue::GeluAuxBias], kLayers);
  EXPECT_EQ(on[MatmulEpilogue::DGeluBgrad], kLayers);
  EXPECT_EQ(on[MatmulEpilogue::BgradA], kLayers);
  EXPECT_EQ(rt::launchCount(folded->plan),
            rt::launchCount(without->plan) - 3 * kLayers);
}

INSTANTIATE_TEST_SUITE_P(Gpt2, Gpt2Steps, testing::Values("", "bf16"),
                         [](const testing::TestParamInfo<const char *> &i) {
                           return std::string(*i.param ? i.param : "f32");
                         });

} // namespace
