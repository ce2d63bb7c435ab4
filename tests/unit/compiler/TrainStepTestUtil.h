//===- TrainStepTestUtil.h - Run a train step two ways, compare bits
//-------===//
//
// Helpers of the differential tests that compare a compiled training step
// with a rewritten one bit for bit (step-fuse: FuseDiffTest, step-remat:
// RematTest): small models traced with their params, deterministic
// arguments, the interpreter and the CPU backend, and a bitwise comparison
// naming the first differing element.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_TRAINSTEPTESTUTIL_H
#define STEP_TESTS_TRAINSTEPTESTUTIL_H

#include "compiler/interpreter/Interpreter.h"
#include "compiler/pipeline/PlanBuilder.h"
#include "compiler/pipeline/Train.h"
#include "compiler/trace/Trace.h"
#include "examples/gpt2/Model.h"
#include "examples/mlp/MLP.h"
#include "passes/Passes.h"
#include "runtime/cpu/Executor.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

namespace step::test {
using mlir::ModuleOp;
using mlir::OwningOpRef;
using mlir::func::FuncOp;

inline std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::step::registerStepPasses();
  auto ctx = std::make_unique<mlir::MLIRContext>();
  ctx->loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  ctx->disableMultithreading(); // 2-core CI: threads only add overhead
  return ctx;
}

/// Bitwise equality of two result lists; the message names the first
/// differing result and element with both values.
inline testing::AssertionResult
sameBits(const std::vector<rt::HostTensor> &want,
         const std::vector<rt::HostTensor> &got,
         const std::vector<std::string> &names) {
  if (want.size() != got.size())
    return testing::AssertionFailure()
           << got.size() << " results, expected " << want.size();
  for (size_t r = 0; r < want.size(); ++r) {
    if (want[r].bitwiseEqual(got[r]))
      continue;
    std::string name = r < names.size() ? names[r] : "#" + std::to_string(r);
    if (want[r].dtype() != got[r].dtype() || want[r].shape() != got[r].shape())
      return testing::AssertionFailure()
             << "result " << name << ": " << rt::dtypeName(got[r].dtype())
             << rt::shapeToString(got[r].shape()) << ", expected "
             << rt::dtypeName(want[r].dtype())
             << rt::shapeToString(want[r].shape());
    size_t size = rt::dtypeSize(want[r].dtype());
    const auto *a = static_cast<const uint8_t *>(want[r].raw());
    const auto *b = static_cast<const uint8_t *>(got[r].raw());
    int64_t differ = 0, first = -1;
    for (int64_t i = 0; i < want[r].numel(); ++i)
      if (std::memcmp(a + i * size, b + i * size, size) != 0) {
        ++differ;
        if (first < 0)
          first = i;
      }
    return testing::AssertionFailure()
           << "result " << name << ": " << differ << " of " << want[r].numel()
           << " elements differ, first #" << first << ": "
           << got[r].getAsDouble(first) << ", expected "
           << want[r].getAsDouble(first);
  }
  return testing::AssertionSuccess();
}

inline std::vector<std::string> resultNames(FuncOp f) {
  std::vector<std::string> names;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    names.push_back(resultName(f, i));
  return names;
}

/// Interprets `f`; empty (with a failure) if the interpreter fails.
inline std::vector<rt::HostTensor>
interpretOrFail(FuncOp f, const std::vector<rt::HostTensor> &args) {
  auto r = interpret(f, args);
  if (mlir::failed(r)) {
    ADD_FAILURE() << "the interpreter failed on @" << f.getName().str();
    return {};
  }
  return *r;
}

/// Plans @`func` of `module` (adding step.offsets to it), with the updates
/// donated to their buffers or not (Donation.cpp); nullopt (with a
/// failure) on an rt::Error.
inline std::optional<rt::Artifact>
planOrFail(ModuleOp module, const std::string &func, bool donate = true) {
  try {
    return planArtifact(module, func, nullptr, donate);
  } catch (const rt::Error &e) {
    ADD_FAILURE() << "planArtifact: " << e.what();
    return std::nullopt;
  }
}

/// Runs `artifact` on the CPU backend; empty (with a failure) on an
/// rt::Error or without an artifact.
inline std::vector<rt::HostTensor>
cpuOrFail(const std::optional<rt::Artifact> &a,
          const std::vector<rt::HostTensor> &args) {
  if (!a)
    return {};
  try {
    return rt::cpu::execute(*a, args);
  } catch (const rt::Error &e) {
    ADD_FAILURE() << "CPU backend: " << e.what();
    return {};
  }
}

struct Model {
  std::string mlir;
  std::map<std::string, rt::HostTensor> params;
  int64_t classes = 0; ///< integer inputs are drawn from [0, classes)
};

inline Model mlpModel() {
  trace::Graph g(3);
  mlp::Sizes s;
  s.in = 12, s.hidden1 = 16, s.hidden2 = 8, s.classes = 5, s.batch = 4;
  mlp::traceMLP(g, s);
  return {g.mlir(), g.initialParams(), s.classes};
}

/// GPT-2 of `cfg` traced with params seeded by `seed`.
inline Model tracedGPT2(const gpt2::GPT2Config &cfg, uint64_t seed) {
  using namespace step::trace;
  Graph g(seed);
  Tensor tokens = g.input("tokens", {cfg.batch, cfg.context}, DType::I64);
  Tensor targets = g.input("targets", {cfg.batch, cfg.context}, DType::I64);
  g.output(gpt2::buildGPT2(g, cfg, tokens, targets));
  return {g.mlir(), g.initialParams(), cfg.vocab};
}

inline Model gpt2Model() {
  gpt2::GPT2Config cfg;
  cfg.vocab = 32, cfg.context = 8, cfg.layers = 2, cfg.heads = 2,
  cfg.width = 16, cfg.batch = 2;
  return tracedGPT2(cfg, 5);
}

/// GPT-2 whose activations outweigh its params (B*T = 128 rows of width
/// 16 against ~25k params), so recomputation and offloading move the
/// planned peak; with 3 layers its forward has 9 candidate segments, with
/// 2 layers 7 (both past step-remat's default exact-limit of 6: the
/// greedy solver's side).
inline Model gpt2Wide(bool checkpointBlocks = false, int64_t layers = 3) {
  gpt2::GPT2Config cfg;
  cfg.vocab = 64, cfg.context = 32, cfg.layers = layers, cfg.heads = 2,
  cfg.width = 16, cfg.batch = 4;
  cfg.checkpointBlocks = checkpointBlocks;
  return tracedGPT2(cfg, 7);
}
/// gpt2Wide() as a `Model (*)()` for tables of cases.
inline Model gpt2Default() { return gpt2Wide(); }

/// A train step built by the pipeline, with what the memory passes
/// recorded (their dictionaries are null when they did not run).
struct BuiltStep {
  OwningOpRef<ModuleOp> module; ///< null when the pipeline failed
  std::string errors;           ///< its diagnostics
  mlir::DictionaryAttr remat, offload;
  std::vector<PassRecord> records; ///< what stepc --report would list

  /// The records of pass `name`, in order.
  std::vector<const PassRecord *> recordsOf(const std::string &name) const {
    std::vector<const PassRecord *> out;
    for (const PassRecord &r : records)
      if (r.pass == name)
        out.push_back(&r);
    return out;
  }

  FuncOp step() { return module->lookupSymbol<FuncOp>("train_step"); }
  static int64_t intOf(mlir::DictionaryAttr d, const char *key) {
    auto v = d ? d.getAs<mlir::IntegerAttr>(key) : nullptr;
    return v ? v.getInt() : -1;
  }
  int64_t get(const char *key) const { return intOf(remat, key); }
  int64_t off(const char *key) const { return intOf(offload, key); }
};

/// Parses `model` and runs the training pipeline with `t`, capturing the
/// diagnostics. `ignoreScopes` drops the checkpoint scopes' marks first
/// (the baseline of a model that has them).
inline BuiltStep buildStep(mlir::MLIRContext *ctx, const Model &model,
                           const TrainOptions &t, bool ignoreScopes = false) {
  BuiltStep b;
  mlir::ScopedDiagnosticHandler capture(ctx, [&](mlir::Diagnostic &d) {
    b.errors += d.str() + "\n";
    return mlir::success();
  });
  b.module = mlir::parseSourceString<ModuleOp>(model.mlir, ctx);
  if (!b.module) {
    ADD_FAILURE() << "the model does not parse";
    return b;
  }
  if (ignoreScopes)
    b.module->walk(
        [](mlir::Operation *op) { op->removeAttr("step.checkpoint"); });
  if (mlir::failed(buildTrainStep(*b.module, t, &b.records))) {
    b.module = nullptr;
    return b;
  }
  b.remat = b.step()->getAttrOfType<mlir::DictionaryAttr>("step.remat");
  b.offload = b.step()->getAttrOfType<mlir::DictionaryAttr>("step.offload");
  return b;
}

/// The arguments of @train_step: the model's params, zero optimizer state
/// (as at the start of training) and deterministic inputs.
inline std::vector<rt::HostTensor> trainArgs(FuncOp f, const Model &model) {
  std::vector<rt::HostTensor> args;
  uint64_t lcg = 12345;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    std::string name = argumentName(f, i);
    auto it = model.params.find(name);
    if (it != model.params.end()) {
      args.push_back(it->second);
      continue;
    }
    auto type = mlir::cast<mlir::RankedTensorType>(f.getArgumentTypes()[i]);
    rt::HostTensor t(*toDType(type.getElementType()),
                     rt::Shape(type.getShape().begin(), type.getShape().end()));
    if (name.rfind("opt.", 0) != 0)
      for (int64_t k = 0; k < t.numel(); ++k) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t bits = lcg >> 33;
        t.setFromDouble(k, rt::isFloat(t.dtype())
                               ? static_cast<double>(bits % 2001) / 1000 - 1
                               : static_cast<double>(bits % model.classes));
      }
    args.push_back(std::move(t));
  }
  return args;
}

/// The arguments of the next update: each result replaces the argument of
/// its name (params and state), inputs stay.
inline std::vector<rt::HostTensor>
nextArgs(FuncOp f, std::vector<rt::HostTensor> args,
         const std::vector<rt::HostTensor> &out) {
  std::map<std::string, const rt::HostTensor *> byName;
  for (unsigned r = 0; r < out.size(); ++r)
    byName[resultName(f, r)] = &out[r];
  for (unsigned i = 0; i < args.size(); ++i)
    if (auto it = byName.find(argumentName(f, i)); it != byName.end())
      args[i] = *it->second;
  return args;
}

/// One way of running a train step: its results for the given arguments.
using StepRunner = std::function<std::vector<rt::HostTensor>(
    const std::vector<rt::HostTensor> &)>;

/// Two updates (the second starts from non-zero optimizer state) from
/// trainArgs, each with the arguments `want`'s previous results give
/// (nextArgs); `got`'s results must equal `want`'s bit for bit. `want`'s
/// results per update are appended to `wanted` when given.
inline void
expectSameUpdates(FuncOp f, const Model &model, const std::string &what,
                  const StepRunner &want, const StepRunner &got,
                  std::vector<std::vector<rt::HostTensor>> *wanted = nullptr) {
  std::vector<std::string> names = resultNames(f);
  std::vector<rt::HostTensor> args = trainArgs(f, model);
  for (int update = 0; update < 2; ++update) {
    SCOPED_TRACE(what + ", update " + std::to_string(update));
    std::vector<rt::HostTensor> a = want(args);
    std::vector<rt::HostTensor> b = got(args);
    ASSERT_FALSE(a.empty());
    ASSERT_TRUE(std::isfinite(a[0].getAsDouble(0)));
    ASSERT_TRUE(sameBits(a, b, names));
    if (wanted)
      wanted->push_back(a);
    args = nextArgs(f, args, a);
  }
}

/// max over elements |a - b| / max |b - base|: how far `a`'s update from
/// `base` is from `b`'s.
inline double updateErr(const rt::HostTensor &a, const rt::HostTensor &b,
                        const rt::HostTensor &base) {
  double worst = 0.0, scale = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    worst = std::max(worst, std::abs(a.getAsDouble(i) - b.getAsDouble(i)));
    scale = std::max(scale, std::abs(b.getAsDouble(i) - base.getAsDouble(i)));
  }
  return worst / std::max(scale, 1e-30);
}

/// Expects every updated param among `got` (results of `f` named after its
/// arguments, from `args`) within `tol` of its largest update from `want`'s
/// (updateErr); returns how many params it compared.
inline int64_t expectUpdatesClose(FuncOp f,
                                  const std::vector<rt::HostTensor> &args,
                                  const std::vector<rt::HostTensor> &got,
                                  const std::vector<rt::HostTensor> &want,
                                  double tol) {
  std::vector<std::string> names = resultNames(f);
  int64_t compared = 0;
  for (size_t r = 1; r < got.size() && r < want.size(); ++r)
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (argumentName(f, i) == names[r]) {
        EXPECT_LE(updateErr(got[r], want[r], args[i]), tol) << names[r];
        ++compared;
      }
  return compared;
}

/// The interpreter on `f`, and the CPU backend on `a`, as StepRunners.
inline StepRunner interpreterOf(FuncOp f) {
  return [f](const std::vector<rt::HostTensor> &args) {
    return interpretOrFail(f, args);
  };
}
inline StepRunner cpuOf(const std::optional<rt::Artifact> &a) {
  return [&a](const std::vector<rt::HostTensor> &args) {
    return cpuOrFail(a, args);
  };
}

} // namespace step::test

#endif // STEP_TESTS_TRAINSTEPTESTUTIL_H
