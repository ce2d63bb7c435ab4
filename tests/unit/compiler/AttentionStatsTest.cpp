//===- AttentionStatsTest.cpp - Attention saves its row statistics --------===//
//
// Differential tests of step-attention-stats (passes/AttentionStats.cpp)
// on the tiny GPT-2's training step through the whole pipeline (fused and
// not):
//   * every attention becomes attention_lse and every attention_grad reads
//     its saved result and log-sum-exp;
//   * against the same step with the pass undone (what the pipeline built
//     before it existed), on the interpreter: the loss has the same bits
//     (the forward computes the same result), and the update (SGD, so the
//     update is the gradient times the learning rate) is equal within 1e-5
//     of each param's largest update: rowsum(g * out) and rowsum(P * dP)
//     are the same sum in other orders, with out rounded to f32, and
//     dS = P * (dP - rowsum) cancels where dP is close to the row's sum
//     (seen: 1.4e-6);
//   * the CPU backend gives the interpreter's bits.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include "dialects/step/Fusion.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {
using namespace step;
using namespace step::test;

class AttentionStats : public testing::TestWithParam<bool> {
protected:
  TrainOptions options() const {
    TrainOptions t;
    t.optimizer = OptimizerOptions::parse("sgd,lr=0.1");
    t.fuse = GetParam();
    return t;
  }
  Model model = gpt2Model();
  std::unique_ptr<mlir::MLIRContext> ctx = makeContext();
};

/// `f` with every attention_lse back to attention and no saved operands
/// (attention fusions inlined first: their ops back at the top level).
void undo(FuncOp f) {
  f.walk([](mlir::step::FusionOp fusion) {
    if (fusion.getKind() != mlir::step::kAttentionFusion)
      return;
    mlir::OpBuilder b(fusion);
    mlir::IRMapping map;
    for (auto [arg, in] :
         llvm::zip(fusion.getBlock().getArguments(), fusion.getInputs()))
      map.map(arg, in);
    for (mlir::Operation &op : fusion.getBlock().without_terminator())
      b.clone(op, map);
    for (auto [r, y] :
         llvm::zip(fusion.getResults(), fusion.getYield()->getOperands()))
      r.replaceAllUsesWith(map.lookup(y));
    fusion->erase();
  });
  f.walk([](mlir::step::AttentionGradOp g) {
    g.getOutMutable().clear();
    g.getLseMutable().clear();
  });
  f.walk([](mlir::step::AttentionLseOp a) {
    mlir::OpBuilder b(a);
    auto plain = b.create<mlir::step::AttentionOp>(
        a.getLoc(), a.getResult().getType(), a.getQuery(), a.getKey(),
        a.getValue(), a.getValid(), a.getCausalAttr(), a.getScaleAttr());
    a.getResult().replaceAllUsesWith(plain.getResult());
    a->erase();
  });
}

TEST_P(AttentionStats, GradientsFromTheSavedStatistics) {
  BuiltStep built = buildStep(ctx.get(), model, options());
  ASSERT_TRUE(built.module) << built.errors;
  FuncOp f = built.step();
  int64_t lse = 0, saved = 0, plain = 0;
  f.walk([&](mlir::Operation *op) {
    lse += mlir::isa<mlir::step::AttentionLseOp>(op);
    plain += mlir::isa<mlir::step::AttentionOp>(op);
    if (auto g = mlir::dyn_cast<mlir::step::AttentionGradOp>(op))
      saved += g.getOut() != nullptr;
  });
  EXPECT_EQ(lse, 2); // one per layer
  EXPECT_EQ(saved, 2);
  EXPECT_EQ(plain, 0);

  OwningOpRef<ModuleOp> before = built.module->clone();
  FuncOp g = before->lookupSymbol<FuncOp>("train_step");
  undo(g);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*before)));

  std::vector<rt::HostTensor> args = trainArgs(f, model);
  std::vector<std::string> names = resultNames(f);
  std::vector<rt::HostTensor> got = interpretOrFail(f, args);
  std::vector<rt::HostTensor> want = interpretOrFail(g, args);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got[0].bitwiseEqual(want[0])) << "the loss";
  EXPECT_GE(expectUpdatesClose(f, args, got, want, 1e-5),
            10); // every param of the model

  std::optional<rt::Artifact> artifact =
      planOrFail(*built.module, "train_step");
  ASSERT_TRUE(artifact);
  EXPECT_TRUE(sameBits(cpuOrFail(artifact, args), got, names));
}

TEST_P(AttentionStats, DqFormsMarkEveryGradientAndChangeNoBits) {
  // TrainOptions::attentionSavedDs and attentionAtomicDq mark each
  // attention_grad for its CUDA kernels (AttentionMmaGrad.cpp), each its
  // own mark only; the CPU backend ignores the marks.
  for (bool atomic : {false, true}) {
    SCOPED_TRACE(atomic ? "atomic dq" : "saved dS");
    TrainOptions t = options();
    (atomic ? t.attentionAtomicDq : t.attentionSavedDs) = true;
    llvm::StringLiteral mark =
        atomic ? mlir::step::kAtomicDqAttr : mlir::step::kSavedDsAttr;
    llvm::StringLiteral other =
        atomic ? mlir::step::kSavedDsAttr : mlir::step::kAtomicDqAttr;
    BuiltStep marked = buildStep(ctx.get(), model, t);
    BuiltStep plain = buildStep(ctx.get(), model, options());
    ASSERT_TRUE(marked.module && plain.module) << marked.errors << plain.errors;
    int64_t grads = 0, withMark = 0, unmarked = 0;
    marked.step().walk([&](mlir::step::AttentionGradOp g) {
      ++grads;
      withMark += g->hasAttr(mark) && !g->hasAttr(other);
    });
    plain.step().walk([&](mlir::step::AttentionGradOp g) {
      unmarked += !g->hasAttr(mark) && !g->hasAttr(other);
    });
    EXPECT_EQ(grads, 2);
    EXPECT_EQ(withMark, 2);
    EXPECT_EQ(unmarked, 2);
    std::vector<rt::HostTensor> args = trainArgs(marked.step(), model);
    std::optional<rt::Artifact> artifact =
        planOrFail(*marked.module, "train_step");
    ASSERT_TRUE(artifact);
    EXPECT_TRUE(sameBits(cpuOrFail(artifact, args),
                         interpretOrFail(plain.step(), args),
                         resultNames(plain.step())));
  }
}

INSTANTIATE_TEST_SUITE_P(FusedOrNot, AttentionStats, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &info) {
                           return info.param ? "Fused" : "Unfused";
                         });

} // namespace
