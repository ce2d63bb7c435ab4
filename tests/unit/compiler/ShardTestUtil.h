//===- ShardTestUtil.h - Helpers of the step-shard tests ---------*- C++ -*-===//
//
// Shared by ShardTest.cpp (the differential tests of the pass) and
// ShardSessionTest.cpp (errors, Sessions on a thread group): tolerant
// tensor comparison, a rank's rows of a global batch, SGD options with a
// shard mode, and the models traced at a given batch.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_SHARDTESTUTIL_H
#define STEP_TESTS_SHARDTESTUTIL_H

#include "TrainStepTestUtil.h"

#include "tests/unit/runtime/CommTestUtil.h"

#include "runtime/cpu/Executor.h"
#include "runtime/cpu/Kernels.h"

#include <cmath>

namespace step::test {
using rt::DType;
using rt::HostTensor;
using rt::Shape;

/// ||want - got||_2 / ||want||_2 (the absolute norm when want is zero).
inline double relativeError(const HostTensor &want, const HostTensor &got) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = want.getAsDouble(i), b = got.getAsDouble(i);
    diff += (a - b) * (a - b);
    norm += a * a;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// want and got agree: same dtype and shape, floats within `bound`
/// normwise, integers exactly.
inline testing::AssertionResult closeTo(const HostTensor &want, const HostTensor &got,
                                        double bound) {
  if (want.dtype() != got.dtype() || want.shape() != got.shape())
    return testing::AssertionFailure()
           << rt::dtypeName(got.dtype()) << rt::shapeToString(got.shape())
           << ", expected " << rt::dtypeName(want.dtype())
           << rt::shapeToString(want.shape());
  if (!rt::isFloat(want.dtype()))
    return want.bitwiseEqual(got)
               ? testing::AssertionSuccess()
               : testing::AssertionFailure() << "integers differ";
  double e = relativeError(want, got);
  if (!(e <= bound))
    return testing::AssertionFailure()
           << "relative error " << e << " > " << bound;
  return testing::AssertionSuccess();
}

/// Rows [r*B/n, (r+1)*B/n) of `t` (leading dim B).
/// `artifact` on the CPU backend with its collectives on their own thread
/// (the default) and again in place: the two must give the same bits.
/// Collective: every rank of the calling thread's communicator calls it.
inline std::vector<HostTensor> executeBothWays(const rt::Artifact &artifact,
                                               const std::vector<HostTensor> &args) {
  std::vector<HostTensor> overlapped = rt::cpu::execute(artifact, args);
  std::vector<const HostTensor *> ptrs;
  for (const HostTensor &a : args)
    ptrs.push_back(&a);
  rt::cpu::ExecuteOptions inPlace;
  inPlace.overlapCollectives = false;
  std::vector<HostTensor> again = rt::cpu::execute(artifact, ptrs, inPlace);
  EXPECT_EQ(overlapped.size(), again.size());
  for (size_t i = 0; i < overlapped.size() && i < again.size(); ++i)
    EXPECT_TRUE(overlapped[i].bitwiseEqual(again[i]))
        << "result " << i << ": overlapped collectives differ from in place";
  return overlapped;
}

/// One rank's run of the sharded step: (rank, its arguments) -> results.
using RankRunner =
    std::function<std::vector<HostTensor>(int, const std::vector<HostTensor> &)>;
/// A test's comparison of one process (`want`) with every rank (`ranks`).
using CompareRuns = std::function<void(const std::string &what,
                                       const StepRunner &want,
                                       const RankRunner &ranks)>;

/// Calls `compare` on the interpreter (@train_step of `want`, one
/// process, and of `got`, every rank; the IR is read by `n` threads at
/// once, so the context locks its uniquers meanwhile), then on the CPU
/// backend (the planned artifacts, every rank its own copy, each run with
/// collectives overlapped and in place: executeBothWays).
inline void compareOnInterpreterAndCpu(mlir::MLIRContext *ctx,
                                       BuiltStep &want, BuiltStep &got,
                                       int64_t n, const CompareRuns &compare) {
  FuncOp f = want.step(), g = got.step();
  ctx->enableMultithreading(true);
  compare("interpreter", interpreterOf(f),
          [&](int, const std::vector<HostTensor> &a) {
            return interpretOrFail(g, a);
          });
  ctx->disableMultithreading();
  std::optional<rt::Artifact> plain = planOrFail(*want.module, "train_step");
  std::optional<rt::Artifact> sharded = planOrFail(*got.module, "train_step");
  ASSERT_TRUE(plain && sharded);
  std::vector<rt::Artifact> copies(static_cast<size_t>(n), *sharded);
  compare("CPU backend", cpuOf(plain),
          [&](int r, const std::vector<HostTensor> &a) {
            return executeBothWays(copies[static_cast<size_t>(r)], a);
          });
}

inline HostTensor rowsOf(const HostTensor &t, int64_t r, int64_t n) {
  Shape start(t.shape().size(), 0), limit = t.shape(),
      strides(t.shape().size(), 1);
  EXPECT_GE(t.rank(), 1);
  EXPECT_EQ(t.shape()[0] % n, 0);
  int64_t rows = t.shape()[0] / n;
  start[0] = r * rows;
  limit[0] = start[0] + rows;
  return rt::cpu::slice(t, start, limit, strides);
}

inline TrainOptions sgdOptions(const std::string &mode = "none", int64_t world = 1) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("sgd,lr=0.1,momentum=0.9");
  t.clipNorm = 0.5;
  t.shard = ShardOptions::parse(mode, world);
  return t;
}

/// The MLP of TrainStepTestUtil's sizes at `batch` rows.
inline Model mlpAt(int64_t batch) {
  trace::Graph g(3);
  mlp::Sizes s;
  s.in = 12, s.hidden1 = 16, s.hidden2 = 8, s.classes = 5, s.batch = batch;
  mlp::traceMLP(g, s);
  return {g.mlir(), g.initialParams(), s.classes};
}

inline std::string kindOf(FuncOp f, unsigned i) {
  auto k = f.getArgAttrOfType<mlir::StringAttr>(i, "step.kind");
  return k ? k.getValue().str() : "";
}

inline HostTensor zerosOf(mlir::Type type) {
  auto t = mlir::cast<mlir::RankedTensorType>(type);
  return HostTensor(*toDType(t.getElementType()),
                    Shape(t.getShape().begin(), t.getShape().end()));
}

/// Deterministic global inputs of `f` by name: floats in [-1, 1], integers
/// in [0, classes).
inline std::map<std::string, HostTensor> globalInputs(FuncOp f, int64_t classes) {
  std::map<std::string, HostTensor> inputs;
  uint64_t lcg = 2024;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (kindOf(f, i) != "input")
      continue;
    HostTensor t = zerosOf(f.getArgumentTypes()[i]);
    for (int64_t k = 0; k < t.numel(); ++k) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      uint64_t bits = lcg >> 33;
      t.setFromDouble(k, rt::isFloat(t.dtype())
                             ? static_cast<double>(bits % 2001) / 1000 - 1
                             : static_cast<double>(bits % classes));
    }
    inputs[argumentName(f, i)] = std::move(t);
  }
  return inputs;
}

/// The tiny GPT-2 (context 16) at `batch` sequences.
inline Model gpt2At(int64_t batch) {
  gpt2::GPT2Config cfg;
  cfg.vocab = 32, cfg.context = 16, cfg.layers = 2, cfg.heads = 2,
  cfg.width = 16, cfg.batch = batch;
  return tracedGPT2(cfg, 5);
}

} // namespace step::test

#endif // STEP_TESTS_SHARDTESTUTIL_H
