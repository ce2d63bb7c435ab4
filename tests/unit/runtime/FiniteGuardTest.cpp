//===- FiniteGuardTest.cpp - The executor's observer and the NaN finder ---===//
//
// A hand-built guarded step (PlanTestUtil.h) with a fusion holding a
// step.log, a -inf constant that max() masks away, and a guard.finite
// result: the observer sees every op and every fused op with its values;
// the finder names the log (inside the fusion, with its location) when the
// data makes its operand negative, the input when the data holds a NaN,
// and never the harmless -inf; Session::step refuses the step and keeps
// the params. Expected values are worked out from the math.
//
//===----------------------------------------------------------------------===//

#include "runtime/FiniteGuard.h"

#include "PlanTestUtil.h"
#include "TestUtil.h"
#include "runtime/Session.h"
#include "runtime/cpu/Executor.h"

#include <cmath>
#include <limits>

namespace step::rt::test {
namespace {
const double kNan = std::numeric_limits<double>::quiet_NaN();

/// loss = sum(log(h)^2), g = log(h)^2 * x, w' = w - g, with
/// h = max(-inf, x) * w; guard.finite = check_finite(loss, g). The log and
/// the square are one fusion (plan step 2).
Artifact guardedStep() {
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {4});
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t mask = p.constant(make(F32, {4}, {-kInf, -kInf, -kInf, -kInf}));
  int64_t m = p.transient(F32, {4}, 0), h = p.transient(F32, {4}, 16);
  int64_t c = p.transient(F32, {4}, 32), loss = p.transient(F32, {}, 48);
  int64_t g = p.transient(F32, {4}, 64);
  int64_t ok = p.transient(DType::I1, {}, 80);
  int64_t w1 = p.transient(F32, {4}, 96);
  p.step("step.max", {}, {mask, x}, {m});
  p.step("step.mul", {}, {m, w}, {h});

  auto body = std::make_shared<Plan>();
  body->function = "fusion";
  for (int i = 0; i < 3; ++i)
    body->buffers.push_back({"%" + std::to_string(i), BufferKind::Transient,
                             F32, {4}, -1});
  body->arguments = {0};
  PlanStep log, square;
  log.op = "step.log";
  log.attrs = nlohmann::json::object();
  log.operands = {0};
  log.results = {1};
  log.location = "model.mlir:7:3";
  square.op = "step.mul";
  square.attrs = nlohmann::json::object();
  square.operands = {1, 1};
  square.results = {2};
  body->steps = {log, square};
  body->results = {2};
  body->resultNames = {"result0"};
  PlanStep fusion;
  fusion.op = "step.fusion";
  fusion.attrs = {{"kind", "loop"}};
  fusion.operands = {h};
  fusion.results = {c};
  fusion.body = body;
  p.plan.steps.push_back(fusion);

  p.step("step.reduce_sum", {{"dims", {0}}}, {c}, {loss});
  p.step("step.mul", {}, {c, x}, {g});
  p.step("step.check_finite", {}, {loss, g}, {ok});
  p.step("step.sub", {}, {w, g}, {w1});
  p.result(loss, "loss");
  p.result(w1, "w");
  p.result(ok, kGuardResult);
  p.artifact.meta["guard"] = {{"finite", kGuardResult}};
  p.plan.validate();
  return p.artifact;
}

using Args = std::vector<const HostTensor *>;

struct Seen {
  int64_t fusion;
  size_t index;
  std::string op;
  std::vector<HostTensor> operands, results;
};

TEST(FiniteGuard, ObserverSeesEveryStepAndEveryFusedOp) {
  Artifact a = guardedStep();
  HostTensor w = make(F32, {4}, {1, 1, 2, 1});
  HostTensor x = make(F32, {4}, {1, 2, 3, 4});
  std::vector<Seen> seen;
  cpu::StepObserver record = [&](const cpu::StepEvent &e) {
    seen.push_back({e.fusion, e.index, e.step.op, e.operands, e.results});
  };
  std::vector<HostTensor> watched = cpu::execute(a, Args{&w, &x}, record);
  std::vector<HostTensor> plain = cpu::execute(a, Args{&w, &x});

  // The fused ops come before their fusion step, in body order.
  std::vector<std::tuple<int64_t, size_t, std::string>> order;
  for (const Seen &s : seen)
    order.emplace_back(s.fusion, s.index, s.op);
  std::vector<std::tuple<int64_t, size_t, std::string>> expected = {
      {-1, 0, "step.max"},    {-1, 1, "step.mul"},
      {2, 0, "step.log"},     {2, 1, "step.mul"},
      {-1, 2, "step.fusion"}, {-1, 3, "step.reduce_sum"},
      {-1, 4, "step.mul"},    {-1, 5, "step.check_finite"},
      {-1, 6, "step.sub"}};
  EXPECT_EQ(order, expected);
  ASSERT_EQ(seen.size(), expected.size());
  // The log's operand is h = x * w, its result log(h).
  EXPECT_EQ(values(seen[2].operands[0]), (std::vector<double>{1, 2, 6, 4}));
  EXPECT_EQ(values(seen[2].results[0]),
            (std::vector<double>{0, std::log(2.0f), std::log(6.0f),
                                 std::log(4.0f)}));
  // The fusion step sees its own operand and result, the body's value.
  EXPECT_TRUE(seen[4].operands[0].bitwiseEqual(seen[2].operands[0]));
  EXPECT_TRUE(seen[4].results[0].bitwiseEqual(seen[3].results[0]));
  // The max's first operand is the -inf constant.
  EXPECT_EQ(values(seen[0].operands[0])[0], -kInf);
  // Watching changes nothing.
  ASSERT_EQ(watched.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(watched[i].bitwiseEqual(plain[i])) << "result " << i;
  EXPECT_FALSE(guardTripped(a, plain));
}

TEST(FiniteGuard, NamesTheFusedOpThatMadeTheNaN) {
  Artifact a = guardedStep();
  HostTensor w = make(F32, {4}, {1, 1, 1, 1});
  HostTensor x = make(F32, {4}, {1, 2, -3, 4}); // log(-3) = NaN
  std::vector<HostTensor> results = cpu::execute(a, Args{&w, &x});
  ASSERT_TRUE(guardTripped(a, results));
  NonFiniteOrigin o = findNonFinite(a, Args{&w, &x});
  EXPECT_TRUE(o.reproduced);
  EXPECT_EQ(o.op, "step.log");
  EXPECT_EQ(o.location, "model.mlir:7:3");
  EXPECT_EQ(o.fusion, 2);
  EXPECT_EQ(o.step, 0);
  EXPECT_EQ(o.result, 0u);
  EXPECT_EQ(o.nans, 1);
  EXPECT_EQ(o.infs, 0);
  EXPECT_EQ(o.firstIndex, (Shape{2}));
  EXPECT_TRUE(std::isnan(o.firstValue));
  EXPECT_EQ(describe(o),
            "step.log at model.mlir:7:3 (fused op 0 of the fusion at plan "
            "step 2) made 1 NaN and 0 Inf of 4 elements in result 0 (f32 "
            "[4]) from finite operands, the first at [2] (nan)");
}

TEST(FiniteGuard, ZeroGivesMinusInfAtTheLog) {
  Artifact a = guardedStep();
  HostTensor w = make(F32, {4}, {1, 0, 1, 1}); // log(0) = -inf
  HostTensor x = make(F32, {4}, {1, 2, 3, 4});
  NonFiniteOrigin o = findNonFinite(a, Args{&w, &x});
  EXPECT_EQ(o.op, "step.log");
  EXPECT_EQ(o.nans, 0);
  EXPECT_EQ(o.infs, 1);
  EXPECT_EQ(o.firstIndex, (Shape{1}));
  EXPECT_EQ(o.firstValue, -kInf);
}

TEST(FiniteGuard, BadDataIsNamedBeforeAnyOp) {
  Artifact a = guardedStep();
  HostTensor w = make(F32, {4}, {1, 1, 1, 1});
  HostTensor x = make(F32, {4}, {1, 2, 3, kNan});
  NonFiniteOrigin o = findNonFinite(a, Args{&w, &x});
  EXPECT_TRUE(o.reproduced);
  EXPECT_EQ(o.op, "");
  EXPECT_EQ(o.buffer, "x");
  EXPECT_EQ(o.kind, "input");
  EXPECT_EQ(o.firstIndex, (Shape{3}));
  EXPECT_EQ(describe(o), "input 'x' (f32 [4]) holds 1 NaN and 0 Inf of 4 "
                         "elements, the first at [3] (nan)");
}

TEST(FiniteGuard, FiniteStepDoesNotReproduce) {
  // The -inf constant never reaches the guard: max() turns it into x.
  Artifact a = guardedStep();
  HostTensor w = make(F32, {4}, {1, 1, 1, 1});
  HostTensor x = make(F32, {4}, {1, 2, 3, 4});
  NonFiniteOrigin o = findNonFinite(a, Args{&w, &x});
  EXPECT_FALSE(o.reproduced);
  EXPECT_NE(describe(o).find("did not reproduce"), std::string::npos);
}

TEST(FiniteGuard, GuardResultComesFromTheMeta) {
  Artifact a = guardedStep();
  EXPECT_EQ(guardResult(a), 2);
  Artifact none = a;
  none.meta.erase("guard");
  EXPECT_EQ(guardResult(none), -1);
  HostTensor w = make(F32, {4}, {1, 1, 1, 1});
  HostTensor x = make(F32, {4}, {1, 2, -3, 4});
  EXPECT_FALSE(guardTripped(none, cpu::execute(none, Args{&w, &x})));
  EXPECT_THROW(findNonFinite(none, Args{&w, &x}), Error);

  Artifact missing = a;
  missing.meta["guard"] = {{"finite", "nope"}};
  EXPECT_ERROR(guardResult(missing), {"returns no result of that name"});
  Artifact mistyped = a;
  mistyped.meta["guard"] = {{"finite", "w"}};
  EXPECT_ERROR(guardResult(mistyped), {"'w' is f32 [4], expected i1 []"});
}

TEST(FiniteGuard, SessionRefusesTheStepAndKeepsTheParams) {
  SessionOptions cpu;
  cpu.backend = Backend::Cpu;
  Session s(guardedStep(), cpu);
  HostTensor w = make(F32, {4}, {1, 1, 1, 1});
  s.set("w", w);
  HostTensor bad = make(F32, {4}, {1, 2, -3, 4});
  EXPECT_ERROR(s.step({{"x", bad}}),
               {"non-finite guard: the loss or a gradient of this step is "
                "not finite on the cpu backend; step.log at model.mlir:7:3 "
                "(fused op 0 of the fusion at plan step 2)",
                "the step was not applied"});
  EXPECT_TRUE(s.get("w").bitwiseEqual(w));
  // A good batch afterwards steps from the same params: w' = w - log(x)^2 x.
  double loss = s.step({{"x", make(F32, {4}, {1, 2, 3, 4})}});
  float l2 = std::log(2.0f), l3 = std::log(3.0f), l4 = std::log(4.0f);
  EXPECT_FLOAT_EQ(loss, l2 * l2 + l3 * l3 + l4 * l4);
  EXPECT_FLOAT_EQ(static_cast<float>(s.get("w").getAsDouble(3)),
                  1 - l4 * l4 * 4);
}

TEST(FiniteGuard, PlanLocationsRoundTripAndMayBeAbsent) {
  Artifact a = guardedStep();
  nlohmann::json j = toJson(a.plan);
  const nlohmann::json &fused = j["steps"][2]["body"]["steps"][0];
  EXPECT_EQ(fused["location"], "model.mlir:7:3");
  // Empty locations are not written, and a step without one reads as "".
  EXPECT_FALSE(j["steps"][0].contains("location"));
  Plan back = planFromJson(j);
  EXPECT_EQ(back.steps[2].body->steps[0].location, "model.mlir:7:3");
  EXPECT_EQ(back.steps[0].location, "");
}

} // namespace
} // namespace step::rt::test
