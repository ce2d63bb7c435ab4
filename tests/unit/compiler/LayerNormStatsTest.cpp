//===- LayerNormStatsTest.cpp - Layer norm hands its mean and rstd over ---===//
//
// Differential tests of step-layer-norm-stats (passes/LayerNormStats.cpp)
// on the tiny GPT-2's training step through the whole pipeline (fused and
// not), against the same step built without the pass:
//   * no step.layer_norm is left; unfused, the step has as many row means
//     and rsqrts as without the pass, one rsqrt a layer norm: the forward
//     written out computes two means and an rsqrt that the gradient no
//     longer computes again (unmerged, there would be six means and two
//     rsqrts a layer norm);
//   * on the interpreter, the loss and the SGD update (the gradient times
//     the learning rate) are equal within 1e-5 relative (the loss) and
//     1e-5 of each param's largest update: the forward now computes the
//     layer norm in f32 op by op where the step.layer_norm kernel computed
//     in double, and nothing else changes;
//   * the CPU backend gives the interpreter's bits.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {
using namespace step;
using namespace step::test;

class LayerNormStats : public testing::TestWithParam<bool> {
protected:
  TrainOptions options(bool stats) const {
    TrainOptions t;
    t.optimizer = OptimizerOptions::parse("sgd,lr=0.1");
    t.fuse = GetParam();
    t.layerNormStats = stats;
    return t;
  }
  Model model = gpt2Model();
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
};

/// The ops named `name` in `f`, fusion bodies included.
int64_t count(FuncOp f, llvm::StringRef name) {
  int64_t n = 0;
  f.walk([&](mlir::Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

TEST_P(LayerNormStats, GradientsFromTheForwardsStatistics) {
  BuiltStep built = buildStep(ctx.get(), model, options(true));
  BuiltStep plain = buildStep(ctx.get(), model, options(false));
  ASSERT_TRUE(built.module) << built.errors;
  ASSERT_TRUE(plain.module) << plain.errors;
  FuncOp f = built.step(), g = plain.step();
  int64_t layerNorms = count(g, "step.layer_norm");
  EXPECT_EQ(layerNorms, 5); // two a layer and the final one
  EXPECT_EQ(count(f, "step.layer_norm"), 0);
  if (!GetParam()) { // unfused, one op per value: the rsqrts and means
    EXPECT_EQ(count(f, "step.rsqrt"), count(g, "step.rsqrt"));
    // Without: the gradient's four means; with: the forward's two and
    // the gradient's own two.
    EXPECT_EQ(count(f, "step.reduce_mean"), count(g, "step.reduce_mean"));
    EXPECT_EQ(count(f, "step.rsqrt"), layerNorms);
  }

  std::vector<rt::HostTensor> args = trainArgs(f, model);
  std::vector<std::string> names = resultNames(f);
  ASSERT_EQ(names, resultNames(g));
  std::vector<rt::HostTensor> got = interpretOrFail(f, args);
  std::vector<rt::HostTensor> want = interpretOrFail(g, args);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  double loss = got[0].getAsDouble(0), wantLoss = want[0].getAsDouble(0);
  EXPECT_LE(std::abs(loss - wantLoss), 1e-5 * std::abs(wantLoss));
  EXPECT_GE(expectUpdatesClose(f, args, got, want, 1e-5),
            10); // every param of the model

  std::optional<rt::Artifact> artifact =
      planOrFail(*built.module, "train_step");
  ASSERT_TRUE(artifact);
  EXPECT_TRUE(sameBits(cpuOrFail(artifact, args), got, names));
}

INSTANTIATE_TEST_SUITE_P(FusedAndNot, LayerNormStats, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &info) {
                           return info.param ? "Fused" : "Unfused";
                         });

} // namespace
