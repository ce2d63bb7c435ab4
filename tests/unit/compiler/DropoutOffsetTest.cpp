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
//     interpreter's bits at every counter value.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

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

class DropoutOffset : public testing::TestWithParam<bool> {};

TEST_P(DropoutOffset, NewMasksAfterTheFirstUpdate) {
  Model model = dropoutMlp();
  auto ctx = makeContext();
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  t.fuse = GetParam();
  BuiltStep built = buildStep(ctx.get(), model, t);
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

INSTANTIATE_TEST_SUITE_P(Fusion, DropoutOffset, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &info) {
                           return std::string(info.param ? "fused"
                                                         : "unfused");
                         });

} // namespace
