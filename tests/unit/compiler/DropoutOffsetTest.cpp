//===- DropoutOffsetTest.cpp - A new dropout mask every update ------------===//
//
// Differential tests of step-dropout-offset (passes/DropoutOffset.cpp) on a
// traced MLP with dropout after each hidden layer, through the whole
// training pipeline (fused and not):
//   * the first update (opt.step = 0) is bit-identical to the same step
//     with the offsets removed (the masks keyed by the seeds alone), on the
//     interpreter;
//   * a later update is not: its masks differ, so its loss and gradients
//     do (the defect the pass fixes: without it every update drew the
//     first update's masks);
//   * the CPU backend (fusions with the offset as a rank-0 input) gives the
//     interpreter's bits at every counter value;
//   * under --grad-accum=2 each micro-batch draws the masks of its own
//     counter value (update u, micro-batch j: u * 2 + j).
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <cstring>

namespace {
using namespace step;
using namespace step::test;

Model dropoutMlp() {
  using namespace step::trace;
  Graph g(11);
  Tensor x = g.input("x", {16, 12});
  Tensor y = g.input("y", {16}, DType::I64);
  Tensor h = dropout(relu(mlp::linearLayer(g, "fc1", x, 12, 32)), 0.5, 7);
  h = dropout(relu(mlp::linearLayer(g, "fc2", h, 32, 32)), 0.25, 8);
  Tensor logits = mlp::linearLayer(g, "fc3", h, 32, 5);
  g.output(cross_entropy(logits, y));
  return {g.mlir(), g.initialParams(), 5};
}

/// The arguments with opt.step set to `counter`.
std::vector<rt::HostTensor> atCounter(FuncOp f, std::vector<rt::HostTensor> args,
                                      int64_t counter) {
  for (unsigned i = 0; i < args.size(); ++i)
    if (argumentName(f, i) == "opt.step")
      args[i].data<int64_t>()[0] = counter;
  return args;
}

class DropoutOffset : public testing::TestWithParam<bool> {
protected:
  /// AdamW, fused or not (the parameter).
  TrainOptions options() const {
    TrainOptions t;
    t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
    t.fuse = GetParam();
    return t;
  }
  Model model = dropoutMlp();
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
};

TEST_P(DropoutOffset, NewMasksAfterTheFirstUpdate) {
  BuiltStep built = buildStep(ctx.get(), model, options());
  ASSERT_TRUE(built.module) << built.errors;
  FuncOp f = built.step();
  auto fed = f->getAttrOfType<mlir::IntegerAttr>("step.dropout_offset");
  ASSERT_TRUE(fed);
  EXPECT_EQ(fed.getInt(), 4); // two forward dropouts, two in the backward
  int64_t withOffset = 0;
  f.walk([&](mlir::step::DropoutOp d) { withOffset += d.getOffset() != nullptr; });
  EXPECT_EQ(withOffset, 4);

  // The same step keyed by the seeds alone (what the pipeline built before
  // the pass existed).
  OwningOpRef<ModuleOp> seedsOnly = built.module->clone();
  FuncOp g = seedsOnly->lookupSymbol<FuncOp>("train_step");
  g.walk([](mlir::step::DropoutOp d) { d.getOffsetMutable().clear(); });
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*seedsOnly)));

  std::vector<rt::HostTensor> args = trainArgs(f, model);
  std::vector<std::string> names = resultNames(f);
  std::optional<rt::Artifact> artifact = planOrFail(*built.module, "train_step");
  ASSERT_TRUE(artifact);
  std::vector<rt::HostTensor> first;
  for (int64_t counter : {0, 1, 2}) {
    SCOPED_TRACE("opt.step = " + std::to_string(counter));
    std::vector<rt::HostTensor> a = atCounter(f, args, counter);
    std::vector<rt::HostTensor> got = interpretOrFail(f, a);
    std::vector<rt::HostTensor> seeds = interpretOrFail(g, a);
    ASSERT_FALSE(got.empty());
    ASSERT_FALSE(seeds.empty());
    if (counter == 0)
      EXPECT_TRUE(sameBits(got, seeds, names));
    else // same params and state: only the masks differ
      EXPECT_FALSE(got[0].bitwiseEqual(seeds[0]));
    EXPECT_TRUE(sameBits(cpuOrFail(artifact, a), got, names));
    if (counter == 0)
      first = got;
    else
      EXPECT_FALSE(got[0].bitwiseEqual(first[0]));
  }
}

// --grad-accum=2 on a batch whose two halves are the same rows: micro-batch
// j of update u draws the masks of a one-micro-batch update u * 2 + j, so
// the accumulated loss is the mean of those two updates' losses (before,
// both halves drew the same masks and the mean was one of them).
TEST_P(DropoutOffset, EveryMicroBatchDrawsItsOwnMasks) {
  TrainOptions t = options();
  BuiltStep one = buildStep(ctx.get(), model, t);
  t.gradAccum = 2;
  BuiltStep two = buildStep(ctx.get(), model, t);
  ASSERT_TRUE(one.module) << one.errors;
  ASSERT_TRUE(two.module) << two.errors;
  FuncOp f1 = one.step(), f2 = two.step();
  std::vector<rt::HostTensor> a1 = trainArgs(f1, model);
  std::vector<rt::HostTensor> a2 = trainArgs(f2, model);
  for (unsigned i = 0; i < a2.size(); ++i) {
    auto kind = f2.getArgAttrOfType<mlir::StringAttr>(i, "step.kind");
    if (!kind || kind.getValue() != "input")
      continue;
    // Both halves: the one-micro-batch step's rows.
    const rt::HostTensor &half = a1[i];
    ASSERT_EQ(a2[i].byteSize(), 2 * half.byteSize());
    auto *dst = static_cast<char *>(a2[i].raw());
    std::memcpy(dst, half.raw(), half.byteSize());
    std::memcpy(dst + half.byteSize(), half.raw(), half.byteSize());
  }
  for (int64_t u : {0, 1}) {
    SCOPED_TRACE("update " + std::to_string(u));
    std::vector<rt::HostTensor> r0 =
        interpretOrFail(f1, atCounter(f1, a1, 2 * u));
    std::vector<rt::HostTensor> r1 =
        interpretOrFail(f1, atCounter(f1, a1, 2 * u + 1));
    std::vector<rt::HostTensor> r = interpretOrFail(f2, atCounter(f2, a2, u));
    ASSERT_FALSE(r0.empty() || r1.empty() || r.empty());
    double l0 = r0[0].getAsDouble(0), l1 = r1[0].getAsDouble(0);
    EXPECT_NE(l0, l1);
    // f32 sum and division: a few ulp.
    EXPECT_NEAR(r[0].getAsDouble(0), (l0 + l1) / 2, 1e-6 * std::abs(l0 + l1));
  }
}

INSTANTIATE_TEST_SUITE_P(Fusion, DropoutOffset, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &info) {
                           return std::string(info.param ? "fused"
                                                         : "unfused");
                         });

} // namespace
