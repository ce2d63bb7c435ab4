//===- FuseDiffTest.cpp - step-fuse never changes a result ----------------===//
//
// Differential tests of step-fuse (passes/Fuse.cpp): every function is run
// unfused and fused, on the reference interpreter and on the CPU backend
// (planArtifact + rt::cpu::execute), and every result is compared.
//
// Tolerance: none, the results must be bit-identical. On the CPU a fusion
// changes no arithmetic: the interpreter and the CPU backend run a
// step.fusion body op by op on the same reference kernels
// (runtime/cpu/Kernels.h) as the unfused ops, in the same order per value,
// and the pass only regroups ops and moves elementwise/view ops next to
// their first user, which changes no value. Any differing bit is a bug in
// the pass (a wrong operand, a lost or duplicated result), in the
// interpreter or in the CPU backend, never rounding.
//
// Inputs: 1000 small and 100 large random graphs (FuseGraphGen.h), odd
// seeds cycling through step-fuse's options; two updates of the MLP and
// GPT-2 training steps (AdamW, SGD with momentum or LAMB, the global-norm
// clip, gradient accumulation) on tiny configurations. The random-graph
// tests also assert that fusions of every kind formed, and a mutation test
// that a wrong op inside a fusion is caught. All of it takes ~1.5 s.
//
// Reproducing: STEP_FUSE_SEED=N runs seed N alone and prints the graph
// before and after step-fuse; STEP_FUSE_SEEDS=N runs seeds 1..N (fuzzing).
//
//===----------------------------------------------------------------------===//

#include "FuseGraphGen.h"
#include "TrainStepTestUtil.h"

#include "compiler/interpreter/Interpreter.h"
#include "compiler/pipeline/PlanBuilder.h"
#include "compiler/pipeline/Train.h"
#include "compiler/trace/Trace.h"
#include "dialects/step/Fusion.h"
#include "examples/gpt2/Model.h"
#include "examples/mlp/MLP.h"
#include "passes/Passes.h"
#include "runtime/Session.h"
#include "runtime/cpu/EvalStep.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/FusionChunks.h"
#include "runtime/cpu/Kernels.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>

namespace {
using namespace step;
using namespace step::test;
using mlir::ModuleOp;
using mlir::OwningOpRef;
using mlir::func::FuncOp;

/// Runs the pass pipeline `pipeline` on `module`.
bool runPipeline(ModuleOp module, const std::string &pipeline) {
  mlir::PassManager pm(module.getContext());
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm))) {
    ADD_FAILURE() << "bad pipeline '" << pipeline << "'";
    return false;
  }
  return mlir::succeeded(pm.run(module));
}

struct FusionStats {
  int64_t fusions = 0, multiOutput = 0, fusedOps = 0;
  /// cross_entropy ops, and those in one fusion with a cross_entropy_grad
  /// (step-fuse-loss).
  int64_t losses = 0, lossPairs = 0;
  std::map<std::string, int64_t> kinds;
  void add(ModuleOp m) {
    m.walk([&](mlir::step::FusionOp f) {
      ++fusions;
      ++kinds[f.getKind().str()];
      multiOutput += f.getNumResults() > 1;
      fusedOps += static_cast<int64_t>(f.getBlock().getOperations().size()) - 1;
      lossPairs +=
          !f.getBlock().getOps<mlir::step::CrossEntropyOp>().empty() &&
          !f.getBlock().getOps<mlir::step::CrossEntropyGradOp>().empty();
    });
    m.walk([&](mlir::step::CrossEntropyOp) { ++losses; });
  }
};

int64_t topLevelOps(FuncOp f) {
  return static_cast<int64_t>(f.getBody().front().getOperations().size());
}
//===----------------------------------------------------------------------===//
// Random elementwise/reduction graphs
//===----------------------------------------------------------------------===//

/// Seeds 1..`count`, or 1..$STEP_FUSE_SEEDS (a longer fuzzing run), or
/// only $STEP_FUSE_SEED (to reproduce one failure; its graph is printed).
std::pair<uint64_t, uint64_t> seedRange(uint64_t count) {
  if (const char *one = std::getenv("STEP_FUSE_SEED")) {
    uint64_t s = std::strtoull(one, nullptr, 10);
    return {s, s};
  }
  if (const char *n = std::getenv("STEP_FUSE_SEEDS"))
    return {1, std::strtoull(n, nullptr, 10)};
  return {1, count};
}

/// Odd seeds cycle through step-fuse's options (a small budget, one phase
/// off); even seeds use the defaults and step-fuse-row-chains and
/// step-fuse-loop-reductions after.
std::string pipelineFor(uint64_t seed) {
  static const char *const variants[] = {"step-fuse{max-ops=4}",
                                         "step-fuse{multi-tensor=false}",
                                         "step-fuse{epilogues=false}",
                                         "step-fuse{row-ops=false}",
                                         "step-fuse{max-inputs=2}",
                                         "step-fuse{max-tensors=2 max-ops=6}",
                                         "step-fuse{max-ops=2 max-inputs=1}"};
  return seed % 2 == 0
             ? "step-fuse,step-fuse-row-chains,step-fuse-loop-reductions"
             : variants[(seed / 2) % 7];
}

/// Every check on one graph; returns whether it passed.
bool checkRandomGraph(mlir::MLIRContext &ctx, const fusegen::FuseGraph &g,
                      FusionStats &stats, bool verbose) {
  std::string pipeline = pipelineFor(g.seed);
  SCOPED_TRACE("seed " + std::to_string(g.seed) + ", " + pipeline);
  auto ref = mlir::parseSourceString<ModuleOp>(g.mlir, &ctx);
  if (!ref || mlir::failed(mlir::verify(*ref))) {
    ADD_FAILURE() << "the generated graph is invalid";
    return false;
  }
  FuncOp f = ref->lookupSymbol<FuncOp>("f");
  std::vector<rt::HostTensor> want = interpretOrFail(f, g.args);
  if (want.empty())
    return false;
  for (const rt::HostTensor &t : want)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.getAsDouble(i))) {
        ADD_FAILURE() << "the generator made a non-finite value";
        return false;
      }

  OwningOpRef<ModuleOp> fused(ref->clone());
  if (!runPipeline(*fused, pipeline) || mlir::failed(mlir::verify(*fused))) {
    ADD_FAILURE() << "step-fuse failed or left invalid IR";
    return false;
  }
  stats.add(*fused);
  if (verbose) {
    std::cout << "[fuse-diff] after " << pipeline << ":\n";
    fused->print(llvm::outs());
    llvm::outs() << "\n";
    llvm::outs().flush();
  }
  FuncOp ff = fused->lookupSymbol<FuncOp>("f");
  std::vector<std::string> names = resultNames(f);
  bool ok = true;
  auto check = [&](const std::vector<rt::HostTensor> &got, const char *what) {
    testing::AssertionResult same = sameBits(want, got, names);
    EXPECT_TRUE(same) << what;
    ok = ok && same;
  };
  check(interpretOrFail(ff, g.args), "interpreter, fused vs unfused");
  check(cpuOrFail(planOrFail(*ref, "f"), g.args),
        "CPU backend unfused vs interpreter");
  check(cpuOrFail(planOrFail(*fused, "f"), g.args),
        "CPU backend fused vs interpreter");
  return ok;
}

/// Checks seeds 1..`count` of graphs of `size` and that fusions of every
/// kind formed: a generator that stopped forming groups would pass
/// vacuously.
void checkRandomGraphs(const char *what, uint64_t count,
                       fusegen::FuseGraphSize size) {
  auto start = std::chrono::steady_clock::now();
  auto ctx = makeContext();
  FusionStats stats;
  int64_t ops = 0, printed = 0;
  auto [first, last] = seedRange(count);
  for (uint64_t seed = first; seed <= last; ++seed) {
    fusegen::FuseGraph g = fusegen::generateFuseGraph(seed, size);
    ops += g.ops;
    bool ok = checkRandomGraph(*ctx, g, stats, first == last);
    if ((!ok && printed++ < 3) || first == last)
      std::cout << "[fuse-diff] seed " << seed << " (" << pipelineFor(seed)
                << ") " << (ok ? "passed" : "failed") << " on:\n"
                << g.mlir;
  }
  if (first == last)
    return;
  uint64_t graphs = last - first + 1;
  EXPECT_GT(stats.fusions, static_cast<int64_t>(graphs));
  for (const char *kind :
       {"loop", "reduction", "multi_tensor", "matmul", "row_chain"})
    EXPECT_GT(stats.kinds[kind], 0) << "no " << kind << " fusion";
  EXPECT_GT(stats.multiOutput, 0);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::cout << "[fuse-diff] " << what << ": " << graphs << " graphs, " << ops
            << " ops, " << stats.fusions << " fusions (" << stats.fusedOps
            << " ops inside; loop " << stats.kinds["loop"] << ", reduction "
            << stats.kinds["reduction"] << ", multi_tensor "
            << stats.kinds["multi_tensor"] << ", matmul "
            << stats.kinds["matmul"] << ", row_chain "
            << stats.kinds["row_chain"] << "; " << stats.multiOutput
            << " with several results) in " << seconds << " s\n";
}

//===----------------------------------------------------------------------===//
// The CPU backend's chunked loop fusions (runtime/cpu/FusionChunks.cpp)
//===----------------------------------------------------------------------===//

/// A loop fusion over [7, 1757] (12299 elements: three full chunks of 4096
/// and a partial one) with every kind of step the chunked path takes:
/// broadcasts of a scalar and of a row (gathered), a broadcast that keeps
/// the flat order of a full-size value, reshapes, an iota, compare/select,
/// casts through bf16, GELU, `mul %x, %x`, a small value computed whole
/// (the scalar times two), and two results of different types and shapes.
const char *kChunkedLoop = R"(
func.func @f(%x: tensor<77x1757xf32>, %s: tensor<f32>, %row: tensor<1757xf32>) -> (tensor<77x1757xf32>, tensor<135289xbf16>) {
  %r:2 = step.fusion "loop"(%x, %s, %row) : (tensor<77x1757xf32>, tensor<f32>, tensor<1757xf32>) -> (tensor<77x1757xf32>, tensor<135289xbf16>) {
  ^bb0(%a: tensor<77x1757xf32>, %b: tensor<f32>, %c: tensor<1757xf32>):
    %two = step.add %b, %b : tensor<f32>
    %bs = step.broadcast_in_dim %two, dims = [] : tensor<f32> -> tensor<77x1757xf32>
    %br = step.broadcast_in_dim %c, dims = [1] : tensor<1757xf32> -> tensor<77x1757xf32>
    %sq = step.mul %a, %a : tensor<77x1757xf32>
    %t = step.add %sq, %br : tensor<77x1757xf32>
    %g = step.gelu %t approximate tanh : tensor<77x1757xf32>
    %i = step.iota dim = 1 : tensor<77x1757xf32>
    %m = step.compare gt, %i, %bs : tensor<77x1757xf32>
    %sel = step.select %m, %g, %a : tensor<77x1757xi1>, tensor<77x1757xf32>
    %h = step.cast %sel : tensor<77x1757xf32> -> tensor<77x1757xbf16>
    %flat = step.reshape %h : tensor<77x1757xbf16> -> tensor<135289xbf16>
    %up = step.broadcast_in_dim %flat, dims = [1] : tensor<135289xbf16> -> tensor<1x135289xbf16>
    %back = step.reshape %up : tensor<1x135289xbf16> -> tensor<77x1757xbf16>
    %f = step.cast %back : tensor<77x1757xbf16> -> tensor<77x1757xf32>
    %o = step.mul %f, %bs : tensor<77x1757xf32>
    step.yield %o, %flat : tensor<77x1757xf32>, tensor<135289xbf16>
  }
  return %r#0, %r#1 : tensor<77x1757xf32>, tensor<135289xbf16>
}
)";

TEST(FuseDiff, ChunkedLoopFusionEqualsOpByOp) {
  auto ctx = makeContext();
  OwningOpRef<ModuleOp> module =
      mlir::parseSourceString<ModuleOp>(kChunkedLoop, ctx.get());
  ASSERT_TRUE(module);
  rt::Artifact artifact = planArtifact(*module, "f");
  const rt::Plan &plan = artifact.plan;
  const rt::PlanStep *fusion = nullptr;
  for (const rt::PlanStep &s : plan.steps)
    if (s.op == "step.fusion")
      fusion = &s;
  ASSERT_TRUE(fusion && fusion->body);
  std::vector<rt::HostTensor> operands;
  for (int64_t id : fusion->operands) {
    const rt::BufferDesc &d = plan.buffers[id];
    rt::HostTensor t(d.dtype, d.shape);
    for (int64_t i = 0; i < t.numel(); ++i) // includes exact ties and NaN
      t.setFromDouble(i, i % 97 == 0 ? NAN : ((i * 7919) % 4001) / 250.0 - 8);
    operands.push_back(std::move(t));
  }
  operands[1].setFromDouble(0, 300.0); // iota > 600 takes the GELU branch
  // 34 chunks of 4096: the update threads share them; every count gives
  // the same bits.
  std::optional<std::vector<rt::HostTensor>> chunked;
  for (int threads : {1, 2, 3}) {
    rt::cpu::setUpdateThreads(threads);
    std::vector<rt::HostTensor> copy = operands;
    std::optional<std::vector<rt::HostTensor>> got =
        rt::cpu::runFusionInChunks(*fusion->body, copy);
    ASSERT_TRUE(got) << "the body should qualify for chunks";
    if (!chunked) {
      chunked = got;
      continue;
    }
    ASSERT_EQ(got->size(), chunked->size());
    for (size_t r = 0; r < chunked->size(); ++r)
      EXPECT_TRUE((*got)[r].bitwiseEqual((*chunked)[r]))
          << threads << " threads, result " << r;
  }
  rt::cpu::setUpdateThreads(0);
  size_t ops = 0;
  rt::cpu::FusedOpObserver count = [&](const rt::Plan &, size_t,
                                       const std::vector<rt::HostTensor> &,
                                       const std::vector<rt::HostTensor> &) {
    ++ops;
  };
  std::vector<rt::HostTensor> whole =
      rt::cpu::evalStep(plan, *fusion, operands, &count);
  EXPECT_EQ(ops, fusion->body->steps.size()); // ran op by op
  ASSERT_EQ(chunked->size(), whole.size());
  for (size_t r = 0; r < whole.size(); ++r)
    EXPECT_TRUE((*chunked)[r].bitwiseEqual(whole[r])) << "result " << r;
  // The plain call takes the chunked path and gives the same bits.
  std::vector<rt::HostTensor> viaStep =
      rt::cpu::evalStep(plan, *fusion, operands);
  for (size_t r = 0; r < whole.size(); ++r)
    EXPECT_TRUE(viaStep[r].bitwiseEqual(whole[r])) << "result " << r;
}

TEST(FuseDiff, ChunkedPathDeclinesSmallAndNonLoopBodies) {
  auto ctx = makeContext();
  // Below two chunks, and a body with a reduction: op by op.
  OwningOpRef<ModuleOp> module = mlir::parseSourceString<ModuleOp>(R"(
func.func @f(%x: tensor<8x1000xf32>, %y: tensor<100x100xf32>) -> (tensor<8x1000xf32>, tensor<100xf32>) {
  %a = step.fusion "loop"(%x) : (tensor<8x1000xf32>) -> tensor<8x1000xf32> {
  ^bb0(%p: tensor<8x1000xf32>):
    %e = step.exp %p : tensor<8x1000xf32>
    %n = step.neg %e : tensor<8x1000xf32>
    step.yield %n : tensor<8x1000xf32>
  }
  %b = step.fusion "reduction"(%y) : (tensor<100x100xf32>) -> tensor<100xf32> {
  ^bb0(%p: tensor<100x100xf32>):
    %e = step.exp %p : tensor<100x100xf32>
    %s = step.reduce_sum %e dims = [1] : tensor<100x100xf32> -> tensor<100xf32>
    step.yield %s : tensor<100xf32>
  }
  return %a, %b : tensor<8x1000xf32>, tensor<100xf32>
}
)", ctx.get());
  ASSERT_TRUE(module);
  rt::Artifact artifact = planArtifact(*module, "f");
  int fusions = 0;
  for (const rt::PlanStep &s : artifact.plan.steps) {
    if (s.op != "step.fusion")
      continue;
    ++fusions;
    std::vector<rt::HostTensor> operands;
    for (int64_t id : s.operands)
      operands.emplace_back(artifact.plan.buffers[id].dtype,
                            artifact.plan.buffers[id].shape);
    EXPECT_FALSE(rt::cpu::runFusionInChunks(*s.body, operands));
    EXPECT_EQ(operands[0].numel(), artifact.plan.buffers[s.operands[0]]
                                       .shape[0] *
                                       artifact.plan.buffers[s.operands[0]]
                                           .shape[1]); // untouched
  }
  EXPECT_EQ(fusions, 2);
}

TEST(FuseDiff, RandomGraphsAreBitIdentical) {
  checkRandomGraphs("small graphs", 1000, {});
}

// Longer graphs: more values with several users, longer chains, groups
// that meet the max-ops and max-inputs budgets.
TEST(FuseDiff, LargeRandomGraphsAreBitIdentical) {
  checkRandomGraphs("large graphs", 100, {40, 80});
}

// The comparison can fail: turning one step.add inside a fusion into a
// step.sub must change some result on both backends for most graphs.
TEST(FuseDiff, AMutatedFusionIsCaught) {
  auto ctx = makeContext();
  int64_t mutated = 0, caughtInterp = 0, caughtCpu = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    fusegen::FuseGraph g = fusegen::generateFuseGraph(seed);
    auto ref = mlir::parseSourceString<ModuleOp>(g.mlir, ctx.get());
    ASSERT_TRUE(ref);
    OwningOpRef<ModuleOp> fused(ref->clone());
    ASSERT_TRUE(runPipeline(*fused, "step-fuse"));
    mlir::step::AddOp add;
    fused->walk([&](mlir::step::FusionOp f) {
      f.getBlock().walk([&](mlir::step::AddOp a) {
        if (!add)
          add = a;
      });
    });
    if (!add)
      continue;
    mlir::OpBuilder b(add);
    auto sub = b.create<mlir::step::SubOp>(add.getLoc(), add.getType(),
                                           add.getLhs(), add.getRhs());
    add.replaceAllUsesWith(sub.getResult());
    add.erase();
    ++mutated;
    FuncOp f = ref->lookupSymbol<FuncOp>("f");
    FuncOp ff = fused->lookupSymbol<FuncOp>("f");
    std::vector<rt::HostTensor> want = interpretOrFail(f, g.args);
    caughtInterp += !sameBits(want, interpretOrFail(ff, g.args), {});
    caughtCpu +=
        !sameBits(want, cpuOrFail(planOrFail(*fused, "f"), g.args), {});
  }
  std::cout << "[fuse-diff] mutations caught: interpreter " << caughtInterp
            << ", CPU " << caughtCpu << " of " << mutated << "\n";
  ASSERT_GT(mutated, 10);
  // An add whose operands make a - b == a + b bit for bit (b == 0 in every
  // element used) or whose effect a max/select hides can slip through.
  EXPECT_GT(caughtInterp, mutated * 3 / 4);
  EXPECT_EQ(caughtCpu, caughtInterp);
}

// The generator is deterministic: a failing seed reproduces.
TEST(FuseDiff, GeneratorIsDeterministic) {
  for (uint64_t seed : {3u, 17u, 101u}) {
    fusegen::FuseGraph a = fusegen::generateFuseGraph(seed);
    fusegen::FuseGraph b = fusegen::generateFuseGraph(seed);
    EXPECT_EQ(a.mlir, b.mlir);
    ASSERT_EQ(a.args.size(), b.args.size());
    for (size_t i = 0; i < a.args.size(); ++i)
      EXPECT_TRUE(a.args[i].bitwiseEqual(b.args[i]));
  }
  EXPECT_NE(fusegen::generateFuseGraph(1).mlir,
            fusegen::generateFuseGraph(2).mlir);
}

// The model form (what tests/fuzz/fuzz-model compiles from its bytes):
// every graph is a model the training pipeline takes, whose step runs on
// the CPU backend to a finite loss (the generator bounds every value).
TEST(FuseDiff, ModelFormTrains) {
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    fusegen::FuseGraph g = fusegen::generateFuseGraph(
        seed, {}, fusegen::GraphForm::Model);
    mlir::MLIRContext ctx;
    ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
    auto module = mlir::parseSourceString<mlir::ModuleOp>(g.mlir, &ctx);
    ASSERT_TRUE(module && mlir::succeeded(mlir::verify(*module))) << g.mlir;
    TrainOptions options;
    options.optimizer.kind = seed % 2 ? OptimizerOptions::Kind::Sgd
                                      : OptimizerOptions::Kind::Adamw;
    ASSERT_TRUE(mlir::succeeded(buildTrainStep(*module, options))) << g.mlir;
    SessionOptions cpu;
    cpu.backend = Backend::Cpu;
    Session session(planArtifact(*module, "train_step"), cpu);
    std::map<std::string, rt::HostTensor> batch;
    for (size_t i = 0; i < g.args.size(); ++i) {
      if (g.argKinds[i] == "param")
        session.set(g.argNames[i], g.args[i]);
      else
        batch[g.argNames[i]] = g.args[i];
    }
    EXPECT_EQ(batch.size(), g.argNames.back() == "y" ? 2u : 1u);
    double loss = session.step(batch);
    EXPECT_TRUE(std::isfinite(loss)) << g.mlir;
  }
}

//===----------------------------------------------------------------------===//
// Training steps
//===----------------------------------------------------------------------===//

struct TrainCase {
  const char *name; ///< the test's name
  Model (*model)();
  const char *pipeline;
  const char *optimizer; ///< OptimizerOptions::parse syntax
  int64_t gradAccum;
  /// Fusion kinds the fused step must contain.
  std::vector<std::string> kinds;
  /// --amp (step-amp), or none; with it, the parameters' casts must be
  /// multi_tensor fusions (step-fuse's phase 5).
  const char *amp = "";
};

/// Names the case in gtest's and ctest's output (not its bytes).
void PrintTo(const TrainCase &c, std::ostream *os) { *os << c.name; }

class FuseTrainStep : public testing::TestWithParam<TrainCase> {};

TEST_P(FuseTrainStep, FusedEqualsUnfusedBitwise) {
  const TrainCase &c = GetParam();
  Model model = c.model();
  auto ctx = makeContext();
  auto ref = mlir::parseSourceString<ModuleOp>(model.mlir, ctx.get());
  ASSERT_TRUE(ref);
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse(c.optimizer);
  t.gradAccum = c.gradAccum;
  t.clipNorm = 0.5; // small enough that the clip scales the gradients
  t.fuse = false;   // the baseline; step-fuse runs on the copy below
  t.amp = AmpOptions::parse(c.amp, "", "auto");
  ASSERT_TRUE(mlir::succeeded(buildTrainStep(*ref, t)));
  OwningOpRef<ModuleOp> fused(ref->clone());
  ASSERT_TRUE(runPipeline(*fused, c.pipeline));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*fused)));

  FuncOp f = ref->lookupSymbol<FuncOp>("train_step");
  FuncOp ff = fused->lookupSymbol<FuncOp>("train_step");
  ASSERT_TRUE(f && ff);
  FusionStats stats;
  stats.add(*fused);
  EXPECT_LT(topLevelOps(ff), topLevelOps(f));
  for (const std::string &kind : c.kinds)
    EXPECT_GT(stats.kinds[kind], 0) << "no " << kind << " fusion";
  if (*c.amp) { // no bare cast of a parameter left (all in 16 MB)
    int64_t castFusions = 0, bareCasts = 0;
    for (mlir::Operation &op : ff.getBody().front()) {
      auto fu = mlir::dyn_cast<mlir::step::FusionOp>(op);
      if (fu && fu.getKind() == "multi_tensor" &&
          llvm::all_of(fu.getBlock().without_terminator(),
                       [](mlir::Operation &i) {
                         return mlir::isa<mlir::step::CastOp>(i);
                       }))
        ++castFusions;
      bareCasts += mlir::isa<mlir::step::CastOp>(op) &&
                   mlir::isa<mlir::BlockArgument>(op.getOperand(0));
    }
    EXPECT_GT(castFusions, 0);
    EXPECT_EQ(bareCasts, 0);
  }
  // step-fuse-loss: every loss computed by its gradient's kernel.
  if (llvm::StringRef(c.pipeline).contains("step-fuse-loss")) {
    EXPECT_GT(stats.losses, 0);
    EXPECT_EQ(stats.lossPairs, stats.losses);
  }
  std::cout << "[fuse-diff] " << c.name << " " << c.pipeline << ": "
            << topLevelOps(f) << " -> " << topLevelOps(ff) << " top-level ops, "
            << stats.fusions << " fusions (loop " << stats.kinds["loop"]
            << ", reduction " << stats.kinds["reduction"] << ", multi_tensor "
            << stats.kinds["multi_tensor"] << ", matmul "
            << stats.kinds["matmul"] << ", attention "
            << stats.kinds["attention"] << ", row_chain "
            << stats.kinds["row_chain"] << ")\n";

  std::vector<std::vector<rt::HostTensor>> interpreted, cpu;
  expectSameUpdates(f, model, "interpreter", interpreterOf(f),
                    interpreterOf(ff), &interpreted);
  std::optional<rt::Artifact> plain = planOrFail(*ref, "train_step");
  std::optional<rt::Artifact> withFusions = planOrFail(*fused, "train_step");
  ASSERT_TRUE(plain && withFusions);
  expectSameUpdates(f, model, "CPU backend", cpuOf(plain), cpuOf(withFusions),
                    &cpu);
  ASSERT_EQ(cpu.size(), interpreted.size());
  for (size_t update = 0; update < cpu.size(); ++update)
    EXPECT_TRUE(sameBits(interpreted[update], cpu[update], resultNames(f)))
        << "CPU backend vs interpreter, update " << update;
}

// The MLP step has no reduction fusion: its only reductions are the loss
// and the bias gradients, whose producers (cross_entropy_grad, the ReLU
// backward select) also feed matmuls.
const std::vector<std::string> kMlpKinds = {"loop", "multi_tensor", "matmul"};
const std::vector<std::string> kGptKinds = {"loop", "reduction", "multi_tensor",
                                            "matmul"};
// With step-fuse-attention first, as the compiler runs them: the heads'
// slices and transposes join the attention kernels; layer norm's backward
// becomes row chains.
const std::vector<std::string> kGptAttentionKinds = {
    "loop", "reduction", "multi_tensor", "matmul", "attention", "row_chain"};
/// f32 GPT-2 has no loop left: its one elementwise chain, GELU's backward,
/// is one step.gelu_grad that joins the bias gradient's reduction.
const std::vector<std::string> kGptF32Kinds = {
    "reduction", "multi_tensor", "matmul", "attention", "row_chain"};

INSTANTIATE_TEST_SUITE_P(
    Models, FuseTrainStep,
    testing::Values(TrainCase{"MLP_AdamW", mlpModel, "step-fuse,step-fuse-loss",
                              "adamw,lr=1e-2", 1, kMlpKinds},
                    TrainCase{"MLP_AdamW_SmallBudgets", mlpModel,
                              "step-fuse{max-ops=4 max-tensors=2}",
                              "adamw,lr=1e-2", 1, kMlpKinds},
                    TrainCase{"MLP_SgdMomentum_Accum2", mlpModel,
                              "step-fuse,step-fuse-loss,"
                              "step-fuse-loop-reductions",
                              "sgd,lr=0.1,momentum=0.9", 2, kMlpKinds},
                    TrainCase{"MLP_Lamb", mlpModel, "step-fuse", "lamb,lr=1e-2",
                              1, kMlpKinds},
                    TrainCase{"GPT2_AdamW", gpt2Model,
                              "step-fuse-attention,step-fuse,step-fuse-loss,"
                              "step-fuse-row-chains,step-fuse-loop-reductions",
                              "adamw,lr=1e-2", 1, kGptF32Kinds},
                    TrainCase{"GPT2_AdamW_Bf16", gpt2Model,
                              "step-fuse-attention,step-fuse,step-fuse-loss,"
                              "step-fuse-row-chains,step-fuse-loop-reductions",
                              "adamw,lr=1e-2", 1, kGptAttentionKinds, "bf16"},
                    TrainCase{"GPT2_AdamW_NoAttentionFusion", gpt2Model,
                              "step-fuse", "adamw,lr=1e-2", 1, kGptKinds},
                    TrainCase{"GPT2_AdamW_SmallBudgets", gpt2Model,
                              "step-fuse{max-tensors=3 row-ops=false}",
                              "adamw,lr=1e-2", 1, kGptKinds},
                    TrainCase{"GPT2_Lamb_Accum2", gpt2Model,
                              "step-fuse-attention,step-fuse,step-fuse-loss,"
                              "step-fuse-row-chains,step-fuse-loop-reductions",
                              "lamb,lr=1e-2", 2, kGptAttentionKinds}),
    [](const testing::TestParamInfo<TrainCase> &info) {
      return std::string(info.param.name);
    });

/// Device launches of the planned @train_step of `model`.
int64_t launches(const Model &model, bool fuse) {
  auto ctx = makeContext();
  auto module = mlir::parseSourceString<ModuleOp>(model.mlir, ctx.get());
  EXPECT_TRUE(module);
  if (!module)
    return 0;
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
  t.clipNorm = 1.0;
  t.fuse = fuse;
  EXPECT_TRUE(mlir::succeeded(buildTrainStep(*module, t)));
  std::optional<rt::Artifact> a = planOrFail(*module, "train_step");
  return a ? rt::launchCount(a->plan) : 0;
}

// The issue's goal: at least 3x fewer kernel launches per GPT-2 training
// step than without fusion (step-bench reports the same count).
//===----------------------------------------------------------------------===//
// step-splat-broadcast
//===----------------------------------------------------------------------===//

/// Constants of more than one element whose value is a splat.
int64_t fullSplats(ModuleOp m) {
  int64_t n = 0;
  m.walk([&](mlir::step::ConstantOp c) {
    auto dense = mlir::dyn_cast<mlir::DenseElementsAttr>(c.getValue());
    n += dense && dense.isSplat() && dense.getNumElements() > 1;
  });
  return n;
}

// Splats of f32 (a finite value, -inf, one used twice), bf16 and i32
// become broadcasts of one element; a non-splat constant and a rank-0 one
// stay. The function gives the same bits alone and fused, interpreted and
// on the CPU backend, and the plan's constants shrink to a few bytes.
TEST(SplatBroadcast, SameBitsAndNothingStoredInFull) {
  const char *text = R"(
func.func @f(%x: tensor<32x32xf32>, %h: tensor<32x32xbf16>, %n: tensor<32x32xi32>)
    -> (tensor<32x32xf32>, tensor<32x32xbf16>, tensor<32x32xi32>, tensor<8xf32>) {
  %half = step.constant dense<5.000000e-01> : tensor<32x32xf32>
  %one = step.constant dense<1.000000e+00> : tensor<32x32xf32>
  %ninf = step.constant dense<0xFF800000> : tensor<32x32xf32>
  %a = step.mul %x, %half : tensor<32x32xf32>, tensor<32x32xf32>
  %b = step.sub %one, %a : tensor<32x32xf32>, tensor<32x32xf32>
  %p = step.compare gt, %x, %half : tensor<32x32xf32>, tensor<32x32xf32>
  %s = "step.select"(%p, %b, %ninf) : (tensor<32x32xi1>, tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %t = step.add %s, %half : tensor<32x32xf32>, tensor<32x32xf32>
  %hc = step.constant dense<2.500000e+00> : tensor<32x32xbf16>
  %hb = step.add %h, %hc : tensor<32x32xbf16>, tensor<32x32xbf16>
  %nc = step.constant dense<3> : tensor<32x32xi32>
  %nb = step.mul %n, %nc : tensor<32x32xi32>, tensor<32x32xi32>
  %tbl = step.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %k = step.constant dense<2.000000e+00> : tensor<f32>
  %kb = step.broadcast_in_dim %k, dims = [] : tensor<f32> -> tensor<8xf32>
  %r = step.mul %tbl, %kb : tensor<8xf32>, tensor<8xf32>
  return %t, %hb, %nb, %r : tensor<32x32xf32>, tensor<32x32xbf16>, tensor<32x32xi32>, tensor<8xf32>
}
)";
  auto ctx = makeContext();
  auto ref = mlir::parseSourceString<ModuleOp>(text, ctx.get());
  ASSERT_TRUE(ref);
  EXPECT_EQ(fullSplats(*ref), 5);
  std::vector<rt::HostTensor> args = {
      rt::HostTensor(rt::DType::F32, {32, 32}),
      rt::HostTensor(rt::DType::BF16, {32, 32}),
      rt::HostTensor(rt::DType::I32, {32, 32})};
  for (int64_t i = 0; i < 1024; ++i) {
    args[0].setFromDouble(i, (i % 7) * 0.25 - 0.5);
    args[1].setFromDouble(i, i * 0.125);
    args[2].setFromDouble(i, i - 9);
  }
  FuncOp f = ref->lookupSymbol<FuncOp>("f");
  std::vector<rt::HostTensor> want = interpretOrFail(f, args);
  ASSERT_EQ(want.size(), 4u);
  OwningOpRef<ModuleOp> planned(ref->clone());
  std::optional<rt::Artifact> before = planOrFail(*planned, "f");
  ASSERT_TRUE(before);
  for (const char *pipeline :
       {"step-splat-broadcast", "step-splat-broadcast,step-fuse"}) {
    SCOPED_TRACE(pipeline);
    OwningOpRef<ModuleOp> m(ref->clone());
    ASSERT_TRUE(runPipeline(*m, pipeline));
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*m)));
    EXPECT_EQ(fullSplats(*m), 0);
    // One scalar per value and type: 0.5, 1, -inf, 2.5 (bf16), 3 (i32),
    // and the rank-0 2 that was there.
    int64_t scalars = 0, others = 0;
    m->walk([&](mlir::step::ConstantOp c) {
      auto t = mlir::cast<mlir::RankedTensorType>(c.getType());
      (t.getRank() == 0 ? scalars : others) += 1;
    });
    EXPECT_EQ(scalars, 6);
    EXPECT_EQ(others, 1); // the table
    FuncOp g = m->lookupSymbol<FuncOp>("f");
    EXPECT_TRUE(sameBits(want, interpretOrFail(g, args), {}));
    std::optional<rt::Artifact> after = planOrFail(*m, "f");
    ASSERT_TRUE(after);
    EXPECT_TRUE(sameBits(want, cpuOrFail(after, args), {}));
    // 5 splats of 1024 elements (4 or 2 bytes each) no longer stored.
    EXPECT_GT(before->sections["constants"].size(), 18000u);
    EXPECT_LT(after->sections["constants"].size(), 1024u);
  }
}

// The training pipeline runs it last: a GPT-2 step keeps no full splat
// and stores a few hundred bytes of constants, with the same losses as
// before (FuseTrainStep compares fused and unfused steps bitwise).
TEST(SplatBroadcast, Gpt2StepStoresNoActivationSizedConstants) {
  Model model = gpt2Model();
  auto ctx = makeContext();
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=1e-3");
  BuiltStep b = buildStep(ctx.get(), model, t);
  ASSERT_TRUE(b.module) << b.errors;
  EXPECT_EQ(fullSplats(*b.module), 0);
  std::optional<rt::Artifact> a = planOrFail(*b.module, "train_step");
  ASSERT_TRUE(a);
  EXPECT_LT(a->sections["constants"].size(), 4096u);
}

TEST(FuseLaunches, Gpt2StepLaunchesAThirdOfTheKernels) {
  int64_t unfused = launches(gpt2Model(), false);
  int64_t fused = launches(gpt2Model(), true);
  std::cout << "[fuse-launches] GPT-2: " << unfused << " -> " << fused
            << "\n";
  ASSERT_GT(fused, 0);
  EXPECT_GE(unfused, 3 * fused);
}

} // namespace
