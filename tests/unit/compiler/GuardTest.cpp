//===- GuardTest.cpp - stepc --guard-finite through the runtime -----------===//
//
// The guarded step against the same step without the guard on finite data,
// bit for bit (losses, params, optimizer state; fused and unfused, f32 and
// fp16 with dynamic loss scaling): the guard only adds a check. On data
// that makes a traced log() produce a NaN, Session::step throws naming
// step.log and the C++ line that traced it, fused or not, and keeps the
// params. Under fp16 dynamic loss scaling an overflowing gradient is a
// skipped step until the scale reaches 1, then a guard error.
//
//===----------------------------------------------------------------------===//

#include "compiler/jit/Jit.h"
#include "compiler/trace/Trace.h"
#include "runtime/FiniteGuard.h"
#include "runtime/Session.h"

#include <gtest/gtest.h>

namespace {
using namespace step;
using namespace step::trace;

/// Where the test model's log() is traced (set by logModel).
unsigned logLine = 0;

/// loss = mean(log(tanh(x @ w1 + b1) * 0.5 + shift) @ w2): with shift
/// 0.6 log's operand lies in [0.1, 1.1], with -0.6 in [-1.1, -0.1] (NaN).
std::string logModel() {
  Graph g(3);
  Tensor x = g.input("x", {4, 3});
  Tensor s = g.input("shift", {4, 5});
  Tensor w1 = g.param("w1", {3, 5}, init::normal(0, 0.5));
  Tensor b1 = g.param("b1", {5}, init::normal(0, 0.5));
  Tensor w2 = g.param("w2", {5, 2}, init::normal(0, 0.5));
  Tensor h = tanh(matmul(x, w1) + b1) * 0.5 + s;
  logLine = __LINE__ + 1;
  Tensor l = log(h);
  g.output(mean(matmul(l, w2)));
  return g.mlir(/*locations=*/true);
}

std::map<std::string, rt::HostTensor> initial() {
  Graph g(3);
  g.input("x", {4, 3});
  g.input("shift", {4, 5});
  g.param("w1", {3, 5}, init::normal(0, 0.5));
  g.param("b1", {5}, init::normal(0, 0.5));
  g.param("w2", {5, 2}, init::normal(0, 0.5));
  return g.initialParams();
}

/// Batch k; `shift` 0.6 keeps log's operand >= 0.1, -0.6 makes it < 0.
std::map<std::string, rt::HostTensor> batch(int k, double shift = 0.6) {
  rt::HostTensor x(rt::DType::F32, {4, 3}), s(rt::DType::F32, {4, 5});
  for (int64_t i = 0; i < 12; ++i)
    x.setFromDouble(i, 0.3 * static_cast<double>((i * 5 + k) % 7) - 0.9);
  for (int64_t i = 0; i < 20; ++i)
    s.setFromDouble(i, shift);
  return {{"x", x}, {"shift", s}};
}

Session session(const TrainOptions &t) {
  SessionOptions o;
  o.backend = Backend::Cpu;
  Session s(compileModel(logModel(), t, /*kernels=*/false), o);
  for (const auto &[name, value] : initial())
    s.set(name, value);
  return s;
}

TrainOptions options(bool fuse, bool guard) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("adamw,lr=0.05");
  t.clipNorm = 1.0;
  t.fuse = fuse;
  t.guardFinite = guard;
  return t;
}

class GuardTest : public testing::TestWithParam<bool> {};

TEST_P(GuardTest, GuardedStepEqualsUnguardedBitForBit) {
  Session plain = session(options(GetParam(), false));
  Session guarded = session(options(GetParam(), true));
  EXPECT_EQ(rt::guardResult(plain.artifact()), -1);
  EXPECT_GE(rt::guardResult(guarded.artifact()), 0);
  for (int k = 0; k < 3; ++k) {
    double a = plain.step(batch(k)), b = guarded.step(batch(k));
    EXPECT_EQ(a, b) << "step " << k;
    EXPECT_EQ(guarded.get(rt::kGuardResult).getAsDouble(0), 1.0);
  }
  for (const auto &names : {plain.paramNames(), plain.stateNames()})
    for (const std::string &name : names)
      EXPECT_TRUE(plain.get(name).bitwiseEqual(guarded.get(name))) << name;
}

TEST_P(GuardTest, NamesTheTracedLogAndKeepsTheParams) {
  Session s = session(options(GetParam(), true));
  s.step(batch(0));
  std::map<std::string, rt::HostTensor> before;
  for (const std::string &name : s.paramNames())
    before[name] = s.get(name);
  for (const std::string &name : s.stateNames())
    before[name] = s.get(name);
  std::string message;
  try {
    s.step(batch(1, -0.6));
    ADD_FAILURE() << "the step should have been refused";
  } catch (const rt::Error &e) {
    message = e.what();
  }
  std::string at = "step.log at " + std::string(__FILE__) + ":" +
                   std::to_string(logLine) + " (";
  EXPECT_NE(message.find(at), std::string::npos) << message;
  EXPECT_NE(message.find("(opt.step = 1 before it)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("from finite operands"), std::string::npos)
      << message;
  // Fused, the log sits inside a fusion and is named as a fused op.
  EXPECT_EQ(message.find("fused op") != std::string::npos, GetParam())
      << message;
  for (const auto &[name, t] : before)
    EXPECT_TRUE(s.get(name).bitwiseEqual(t)) << name;
  // The session goes on from where it was.
  s.step(batch(2));
  EXPECT_EQ(s.get("opt.step").getAsDouble(0), 2);
}

INSTANTIATE_TEST_SUITE_P(Fuse, GuardTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool> &info) {
                           return info.param ? "fused" : "unfused";
                         });

/// loss = sum(x @ w) in fp16 (x [4, 1], w [1, 1]): the gradient of w is
/// scale * sum(x), 240000 * scale for x = 60000, beyond f16's 65504 even at
/// scale 1, while the forward (600 per row) is fine.
std::string sumModel() {
  Graph g(1);
  Tensor x = g.input("x", {4, 1});
  Tensor w = g.param("w", {1, 1}, init::constant(0.01));
  g.output(sum(matmul(x, w)));
  return g.mlir(/*locations=*/true);
}

TEST(GuardFp16, OverflowSkipsUntilTheScaleIsOneThenTrips) {
  for (bool guard : {false, true}) {
    TrainOptions t;
    t.optimizer = OptimizerOptions::parse("sgd,lr=0.001");
    t.amp = AmpOptions::parse("fp16", "", "dynamic,init=4");
    t.guardFinite = guard;
    SessionOptions o;
    o.backend = Backend::Cpu;
    Session s(compileModel(sumModel(), t, /*kernels=*/false), o);
    rt::HostTensor w(rt::DType::F32, {1, 1});
    w.setFromDouble(0, 0.01);
    s.set("w", w);
    rt::HostTensor big(rt::DType::F32, {4, 1});
    for (int64_t i = 0; i < 4; ++i)
      big.setFromDouble(i, 60000);
    // Scales 4 and 2 overflow: skipped steps, by design not errors.
    for (double scale : {4.0, 2.0}) {
      EXPECT_NO_THROW(s.step({{"x", big}})) << "scale " << scale;
      EXPECT_EQ(s.get("amp.loss_scale").getAsDouble(0), scale / 2);
      EXPECT_TRUE(s.get("w").bitwiseEqual(w));
      EXPECT_EQ(s.get("opt.step").getAsDouble(0), 0);
    }
    // At scale 1 nothing is left to blame on scaling: the guard trips
    // (without it the step is skipped once more).
    if (!guard) {
      EXPECT_NO_THROW(s.step({{"x", big}}));
      EXPECT_EQ(s.get("amp.loss_scale").getAsDouble(0), 0.5);
      continue;
    }
    std::string message;
    try {
      s.step({{"x", big}});
    } catch (const rt::Error &e) {
      message = e.what();
    }
    EXPECT_NE(message.find("non-finite guard"), std::string::npos) << message;
    EXPECT_NE(message.find("step.matmul at " + std::string(__FILE__)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("0 NaN and 1 Inf of 1 elements"),
              std::string::npos)
        << message;
    EXPECT_EQ(s.get("amp.loss_scale").getAsDouble(0), 1.0);
    // A finite batch at scale 1 trains.
    rt::HostTensor small(rt::DType::F32, {4, 1});
    for (int64_t i = 0; i < 4; ++i)
      small.setFromDouble(i, 1);
    EXPECT_NO_THROW(s.step({{"x", small}}));
    EXPECT_EQ(s.get("opt.step").getAsDouble(0), 1);
  }
}

} // namespace
