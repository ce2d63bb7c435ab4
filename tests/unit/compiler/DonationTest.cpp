//===- DonationTest.cpp - Updates planned into their params' buffers ------===//
//
// compiler/pipeline/Donation.cpp: a fused step's optimizer updates take
// their param's or state's buffer (the plan's result is the argument's
// buffer), and the step computes what it computed with the buffers apart,
// bit for bit, on the CPU backend (which copies before it writes into an
// argument's buffer: the caller's tensors stay as they were) and against
// the interpreter. Where a write in place could change what a step reads,
// or where the step must keep what it read (the finite guard), nothing is
// donated.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include <gtest/gtest.h>

namespace {
using namespace step;
using namespace step::test;

/// The results planned into an argument's buffer, by name; and how many
/// results carry a param or state argument's name.
std::set<std::string> donatedNames(const rt::Artifact &a, int64_t *named) {
  const rt::Plan &p = a.plan;
  std::set<int64_t> args(p.arguments.begin(), p.arguments.end());
  std::map<std::string, rt::BufferKind> kinds;
  for (int64_t id : p.arguments)
    kinds[p.buffers[id].name] = p.buffers[id].kind;
  std::set<std::string> out;
  *named = 0;
  for (size_t r = 0; r < p.results.size(); ++r) {
    auto it = kinds.find(p.resultNames[r]);
    if (it != kinds.end() && (it->second == rt::BufferKind::Param ||
                              it->second == rt::BufferKind::State))
      ++*named;
    if (args.count(p.results[r])) {
      // Its own argument's buffer, never another's.
      EXPECT_EQ(p.buffers[p.results[r]].name, p.resultNames[r]);
      out.insert(p.resultNames[r]);
    }
  }
  return out;
}

struct DonationCase {
  const char *name;
  Model (*model)();
  const char *optimizer;
  const char *amp = "";
};
void PrintTo(const DonationCase &c, std::ostream *os) { *os << c.name; }

class Donation : public testing::TestWithParam<DonationCase> {};

TEST_P(Donation, UpdatesInPlaceWithTheSameBits) {
  const DonationCase &c = GetParam();
  Model model = c.model();
  auto ctx = makeContext();
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse(c.optimizer);
  t.clipNorm = 0.5;
  t.amp = AmpOptions::parse(c.amp, "", "auto");
  BuiltStep b = buildStep(ctx.get(), model, t);
  ASSERT_TRUE(b.module) << b.errors;
  FuncOp f = b.step();
  std::optional<rt::Artifact> apart, inPlace;
  ASSERT_NO_THROW(apart = planArtifact(*b.module, "train_step", nullptr,
                                       /*donate=*/false));
  ASSERT_NO_THROW(inPlace = planArtifact(*b.module, "train_step"));
  int64_t named = 0;
  EXPECT_TRUE(donatedNames(*apart, &named).empty());
  std::set<std::string> donated = donatedNames(*inPlace, &named);
  // Every param and state the step updates (the update counter, an add
  // outside the updates' fusion, stays apart).
  EXPECT_GT(named, 2);
  EXPECT_EQ(static_cast<int64_t>(donated.size()), named - 1);
  EXPECT_EQ(donated.count("opt.step"), 0u);

  // The caller's tensors are not written: the runner checks its
  // arguments after each run.
  StepRunner checked = [&](const std::vector<rt::HostTensor> &args) {
    std::vector<rt::HostTensor> before = args;
    std::vector<rt::HostTensor> out = cpuOrFail(inPlace, args);
    EXPECT_TRUE(sameBits(before, args, {})) << "an argument was written";
    return out;
  };
  expectSameUpdates(f, model, "CPU backend", cpuOf(apart), checked);
  expectSameUpdates(f, model, "interpreter", interpreterOf(f), checked);
}

INSTANTIATE_TEST_SUITE_P(
    Models, Donation,
    testing::Values(
        DonationCase{"MLP_AdamW", mlpModel, "adamw,lr=1e-2,wd=0.1"},
        DonationCase{"GPT2_Bf16_AdamW", gpt2Model, "adamw,lr=1e-2", "bf16"},
        DonationCase{"GPT2_Momentum", gpt2Model, "sgd,lr=0.1,momentum=0.9"}),
    [](const testing::TestParamInfo<DonationCase> &info) {
      return std::string(info.param.name);
    });

/// The number of results donatedResults gives for the step `t` builds of
/// the MLP; `edit` changes the step first.
size_t donatedOf(TrainOptions t, const std::function<void(FuncOp)> &edit = {}) {
  Model model = mlpModel();
  auto ctx = makeContext();
  BuiltStep b = buildStep(ctx.get(), model, t);
  EXPECT_TRUE(b.module) << b.errors;
  if (!b.module)
    return 0;
  if (edit)
    edit(b.step());
  return donatedResults(b.step()).size();
}

TEST(Donation, NotWhereTheStepMustKeepWhatItRead) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  size_t all = donatedOf(t);
  EXPECT_GT(all, 2u);
  // Unfused updates: their kernels are not the multi_tensor one whose
  // loads precede its stores.
  TrainOptions unfused = t;
  unfused.fuse = false;
  EXPECT_EQ(donatedOf(unfused), 0u);
  // A tripped finite guard keeps the values the step read.
  TrainOptions guarded = t;
  guarded.guardFinite = true;
  EXPECT_EQ(donatedOf(guarded), 0u);
  // A param read after its update (here a dead neg) keeps its buffer; the
  // others are still donated.
  size_t readLate = donatedOf(t, [](FuncOp f) {
    mlir::Block &body = f.getBody().front();
    mlir::Operation *update = nullptr;
    for (mlir::Operation &op : body)
      if (auto fu = mlir::dyn_cast<mlir::step::FusionOp>(op))
        if (fu.getKind() == "multi_tensor" &&
            llvm::any_of(fu.getBlock(), [](mlir::Operation &i) {
              return mlir::isa<mlir::step::AdamwUpdateOp>(i);
            }))
          update = &op;
    ASSERT_TRUE(update);
    mlir::Value param;
    for (unsigned i = 0; i < f.getNumArguments() && !param; ++i)
      if (argumentName(f, i) == "fc1.weight")
        param = f.getArgument(i);
    ASSERT_TRUE(param);
    mlir::OpBuilder builder(update->getContext());
    builder.setInsertionPointAfter(update);
    mlir::OperationState neg(update->getLoc(), "step.neg");
    neg.addOperands(param);
    neg.addTypes(param.getType());
    builder.create(neg);
  });
  EXPECT_EQ(readLate, all - 1);
}

} // namespace
