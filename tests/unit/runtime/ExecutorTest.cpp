//===- ExecutorTest.cpp - The CPU backend running hand-built plans --------===//
//
// Plans are laid out by hand (arena offsets chosen by each test) so that
// arena reuse, constants and every error path are exercised exactly. Values
// are worked out from the math; kernels themselves are tested elsewhere, so
// op results here are compared with a direct kernel call, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Executor.h"

#include "PlanTestUtil.h"
#include "TestUtil.h"
#include "runtime/cpu/EvalStep.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>

namespace step::rt::test {
namespace {
using json = nlohmann::json;
constexpr auto F32 = DType::F32;
constexpr auto In = BufferKind::Input;

HostTensor x23() { return make(F32, {2, 3}, {1, 2, 3, 4, 5, 6}); }
HostTensor y23() { return make(F32, {2, 3}, {10, 20, 30, 40, 50, 60}); }

TEST(Executor, Arithmetic) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t y = p.argument("y", In, F32, {2, 3});
  int64_t sum = p.transient(F32, {2, 3}, 0);
  int64_t prod = p.transient(F32, {2, 3}, 32);
  p.step("step.add", {}, {x, y}, {sum});
  p.step("step.mul", {}, {sum, x}, {prod});
  p.result(prod, "out");
  auto r = cpu::execute(p.artifact, {x23(), y23()});
  ASSERT_EQ(r.size(), 1u);
  expectExact(r[0], F32, {2, 3}, {11, 44, 99, 176, 275, 396});
}

TEST(Executor, ConstantsComeFromTheirSection) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {3});
  int64_t c = p.constant(make(F32, {3}, {0.5, -1, 2}));
  int64_t k = p.constant(make(DType::I64, {}, {7}));
  int64_t sum = p.transient(F32, {3}, 0);
  p.step("step.add", {}, {x, c}, {sum});
  p.result(sum, "sum");
  p.result(k, "k"); // a constant may be returned directly
  auto r = cpu::execute(p.artifact, {make(F32, {3}, {1, 2, 3})});
  expectExact(r[0], F32, {3}, {1.5, 1, 5});
  expectExact(r[1], DType::I64, {}, {7});
}

TEST(Executor, ArenaReuseWithDisjointLifetimes) {
  // t0 = x + y dies at step 1, so t2 may take its bytes at offset 0.
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t y = p.argument("y", In, F32, {2, 3});
  int64_t t0 = p.transient(F32, {2, 3}, 0);
  int64_t t1 = p.transient(F32, {2, 3}, 24);
  int64_t t2 = p.transient(F32, {2, 3}, 0);
  p.step("step.add", {}, {x, y}, {t0});
  p.step("step.mul", {}, {t0, t0}, {t1});
  p.step("step.sub", {}, {t1, x}, {t2});
  p.result(t2, "out");
  EXPECT_EQ(p.plan.arenaBytes, 48);
  auto r = cpu::execute(p.artifact, {x23(), y23()});
  expectExact(r[0], F32, {2, 3}, {120, 482, 1086, 1932, 3020, 4350});
}

TEST(Executor, OverlappingLifetimesCorruptResultsAsOnTheDevice) {
  // A broken memory plan: t1 overwrites t0 while t0 is still live, so
  // t0 - t1 reads t1 twice and gives zeros instead of y - x*y + x.
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t y = p.argument("y", In, F32, {2, 3});
  int64_t t0 = p.transient(F32, {2, 3}, 0);
  int64_t t1 = p.transient(F32, {2, 3}, 0);
  int64_t t2 = p.transient(F32, {2, 3}, 24);
  p.step("step.add", {}, {x, y}, {t0});
  p.step("step.mul", {}, {x, y}, {t1});
  p.step("step.sub", {}, {t0, t1}, {t2});
  p.result(t2, "out");
  auto r = cpu::execute(p.artifact, {x23(), y23()});
  expectExact(r[0], F32, {2, 3}, {0, 0, 0, 0, 0, 0});

  // The same plan with t1 moved out of t0's way is correct.
  p.plan.buffers[t1].offset = 48;
  p.plan.arenaBytes = 72;
  r = cpu::execute(p.artifact, {x23(), y23()});
  expectExact(r[0], F32, {2, 3}, {1, -18, -57, -116, -195, -294});
}

/// t0 = x + y goes to the host and comes back after t1 = x * y has taken
/// its arena bytes; with `clobber`, a second offload writes t1 into the
/// host bytes of t0 while they are live (a broken host plan).
void offloadPlan(PlanBuilder &p, bool clobber) {
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t y = p.argument("y", In, F32, {2, 3});
  int64_t t0 = p.transient(F32, {2, 3}, 0);
  int64_t h0 = p.host(F32, {2, 3}, 0);
  int64_t t1 = p.transient(F32, {2, 3}, 0);
  int64_t back = p.transient(F32, {2, 3}, 24);
  int64_t out = p.transient(F32, {2, 3}, 48);
  p.step("step.add", {}, {x, y}, {t0});
  p.step("step.offload", {}, {t0}, {h0});
  p.step("step.mul", {}, {x, y}, {t1});
  if (clobber)
    p.step("step.offload", {}, {t1}, {p.host(F32, {2, 3}, 0)});
  p.step("step.reload", {}, {h0}, {back});
  p.step("step.sub", {}, {back, t1}, {out});
  p.result(out, "out");
}

TEST(Executor, OffloadedValuesLiveInTheHostArena) {
  // out = t0 - t1 is exact only because the host copy kept t0.
  PlanBuilder p;
  offloadPlan(p, false);
  p.plan.validate();
  auto r = cpu::execute(p.artifact, {x23(), y23()});
  expectExact(r[0], F32, {2, 3}, {1, -18, -57, -116, -195, -294});
  // The broken host plan corrupts the reloaded value as on the device.
  PlanBuilder q;
  offloadPlan(q, true);
  r = cpu::execute(q.artifact, {x23(), y23()});
  expectExact(r[0], F32, {2, 3}, {0, 0, 0, 0, 0, 0});
}

/// x -> neg -> offload -> reload -> out.
void roundTripPlan(PlanBuilder &p) {
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t t0 = p.transient(F32, {2, 3}, 0);
  int64_t h = p.host(F32, {2, 3}, 0);
  int64_t back = p.transient(F32, {2, 3}, 0);
  p.step("step.neg", {}, {x}, {t0});
  p.step("step.offload", {}, {t0}, {h});
  p.step("step.reload", {}, {h}, {back});
  p.result(back, "out");
}

TEST(Executor, HostBuffersAreOnlyCopied) {
  PlanBuilder good;
  roundTripPlan(good);
  good.plan.validate();
  Plan back = planFromJson(toJson(good.plan));
  EXPECT_EQ(back.hostBytes, 24);
  EXPECT_EQ(back.buffers[2].kind, BufferKind::Host);

  PlanBuilder readByKernel;
  roundTripPlan(readByKernel);
  readByKernel.plan.steps[2].op = "step.neg";
  EXPECT_ERROR(readByKernel.plan.validate(),
               {"step 2 (step.neg) reads host buffer '%2'; only step.reload "
                "and host steps may"});
  PlanBuilder intoDevice;
  roundTripPlan(intoDevice);
  intoDevice.plan.buffers[2].kind = BufferKind::Transient;
  EXPECT_ERROR(intoDevice.plan.validate(),
               {"step 1 (step.offload) must copy one device buffer into a "
                "host buffer of the same size"});
  PlanBuilder outside;
  roundTripPlan(outside);
  outside.plan.hostBytes = 16;
  EXPECT_ERROR(outside.plan.validate(),
               {"host buffer '%2' at offset 0 (24 bytes) is outside the host "
                "arena of 16 bytes"});
  PlanBuilder writtenByKernel;
  roundTripPlan(writtenByKernel);
  writtenByKernel.plan.steps[0].results[0] = 2;
  writtenByKernel.plan.steps[1].operands[0] = 0;
  EXPECT_ERROR(writtenByKernel.plan.validate(),
               {"step 0 (step.neg) writes host buffer '%2'; only "
                "step.offload and host steps may"});
}

/// ZeRO-Offload's shape (step-offload-optimizer): param w in host memory,
/// a host step on it, its result reloaded; out = reload(neg(w)) + x.
void hostStepPlan(PlanBuilder &p) {
  int64_t w = p.argument("w", BufferKind::Param, F32, {2, 3});
  p.plan.buffers[w].host = true;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t h = p.host(F32, {2, 3}, 0);
  int64_t back = p.transient(F32, {2, 3}, 0);
  int64_t out = p.transient(F32, {2, 3}, 32);
  p.step("step.neg", {}, {w}, {h});
  p.plan.steps.back().host = true;
  p.step("step.reload", {}, {h}, {back});
  p.step("step.add", {}, {back, x}, {out});
  p.result(out, "out");
  p.result(h, "w");
}

TEST(Executor, HostStepsTouchHostMemoryOnly) {
  PlanBuilder good;
  hostStepPlan(good);
  good.plan.validate();
  Plan back = planFromJson(toJson(good.plan));
  EXPECT_TRUE(back.buffers[0].host);
  EXPECT_FALSE(back.buffers[1].host);
  EXPECT_TRUE(back.steps[0].host);
  EXPECT_FALSE(back.steps[1].host);
  // A host result is a result (the new param, read back from host memory).
  auto r = cpu::execute(good.artifact, {x23(), y23()});
  HostTensor x = x23(), y = y23();
  std::vector<double> sum, neg;
  for (int64_t i = 0; i < 6; ++i) {
    sum.push_back(-x.getAsDouble(i) + y.getAsDouble(i));
    neg.push_back(-x.getAsDouble(i));
  }
  expectExact(r[0], F32, {2, 3}, sum);
  expectExact(r[1], F32, {2, 3}, neg);

  // Each defect, made in a fresh copy of the plan, and its message.
  struct Defect {
    std::function<void(Plan &)> make;
    const char *message;
  };
  const Defect defects[] = {
      {[](Plan &p) { p.steps[0].operands[0] = 1; },
       "host step 0 (step.neg) reads device buffer 'x'; a host step reads "
       "host memory only"},
      {[](Plan &p) { p.steps[0].results[0] = 3; },
       "step 0 (step.neg) must write host buffer '%3'; a host step writes "
       "host buffers only"},
      {[](Plan &p) { p.steps[2].operands[0] = 0; },
       "step 2 (step.add) reads host buffer 'w'; only step.reload and host "
       "steps may"},
      {[](Plan &p) { p.buffers[1].host = true; },
       "input buffer 'x' has memory 'host'; only params and optimizer "
       "state may"},
      {[](Plan &p) { p.steps[0].op = "step.all_reduce"; },
       "step 0 (step.all_reduce) cannot run on the host"},
  };
  for (const Defect &d : defects) {
    PlanBuilder bad;
    hostStepPlan(bad);
    d.make(bad.plan);
    EXPECT_ERROR(bad.plan.validate(), {d.message});
  }
  nlohmann::json j = toJson(good.plan);
  j["buffers"][0]["memory"] = "disk";
  EXPECT_ERROR(planFromJson(j), {"buffer 'w' has memory 'disk'; expected "
                                 "device or host"});
}

TEST(Executor, ArgumentsAreChecked) {
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {2, 3});
  int64_t t = p.transient(F32, {2, 3}, 0);
  p.step("step.neg", {}, {w}, {t});
  p.result(t, "out");
  EXPECT_ERROR(cpu::execute(p.artifact, std::vector<HostTensor>{}),
               {"takes 1 arguments, got 0"});
  EXPECT_ERROR(cpu::execute(p.artifact, {make(F32, {3, 2}, {1, 2, 3, 4, 5, 6})}),
               {"argument 0", "'w'", "param",
                "expected f32 [2, 3], found f32 [3, 2]"});
  EXPECT_ERROR(cpu::execute(p.artifact, {HostTensor(DType::BF16, {2, 3})}),
               {"'w'", "expected f32 [2, 3], found bf16 [2, 3]"});
}

TEST(Executor, UnknownOpNamesTheOpAndTheStep) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {3});
  int64_t a = p.transient(F32, {3}, 0);
  int64_t b = p.transient(F32, {3}, 16);
  p.step("step.neg", {}, {x}, {a});
  p.step("step.frobnicate", {}, {a}, {b});
  p.result(b, "out");
  EXPECT_ERROR(cpu::execute(p.artifact, {HostTensor(F32, {3})}),
               {"plan step 1", "unknown op 'step.frobnicate'"});
}

TEST(Executor, EveryDialectOpHasAKernel) {
  // step.constant never appears as a step: constants are buffers;
  // step.yield ends a fusion body, which the fusion step runs.
  // clang-format off
  std::vector<std::string> ops = {
      "abs", "adamw_update", "add", "all_gather", "all_reduce", "attention",
      "attention_grad", "attention_lse",
      "broadcast_in_dim", "cast", "check_finite", "compare", "concat", "cos",
      "cross_entropy", "cross_entropy_grad", "div", "dropout", "embedding",
      "embedding_grad", "erf", "exp", "fusion", "gelu", "gelu_grad", "iota",
      "lamb_update",
      "layer_norm", "local_shard", "log", "log_softmax", "matmul", "max",
      "min", "mul", "neg", "offload", "pad", "pow", "reduce_max",
      "reduce_mean", "reduce_scatter", "reduce_sum", "reload", "relu",
      "reshape", "rsqrt", "select", "sgd_update", "sigmoid", "sin", "slice",
      "softmax", "sqrt", "stop_gradient", "sub", "tanh", "transpose"};
  // clang-format on
  std::vector<std::string> supported = cpu::supportedOps();
  for (const std::string &op : ops)
    EXPECT_TRUE(std::count(supported.begin(), supported.end(), "step." + op))
        << "no kernel for step." << op;
  EXPECT_EQ(supported.size(), ops.size());
}

TEST(Executor, CheckFiniteTakesAnyNumberOfOperands) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {3});
  int64_t y = p.argument("y", In, DType::BF16, {2});
  int64_t one = p.transient(DType::I1, {}, 0);
  int64_t both = p.transient(DType::I1, {}, 16);
  p.step("step.check_finite", {}, {x}, {one});
  p.step("step.check_finite", {}, {x, y, x}, {both});
  p.result(one, "one");
  p.result(both, "both");
  HostTensor fx = make(F32, {3}, {1, 2, 3});
  auto r = cpu::execute(p.artifact,
                        {fx, make(DType::BF16, {2}, {0.5, -4})});
  expectExact(r[0], DType::I1, {}, {1});
  expectExact(r[1], DType::I1, {}, {1});
  // An infinity in the second operand only.
  r = cpu::execute(p.artifact,
                   {fx, make(DType::BF16, {2}, {0.5, -INFINITY})});
  expectExact(r[0], DType::I1, {}, {1});
  expectExact(r[1], DType::I1, {}, {0});

  PlanBuilder none;
  int64_t t = none.transient(DType::I1, {}, 0);
  none.step("step.check_finite", {}, {}, {t});
  none.result(t, "ok");
  EXPECT_ERROR(cpu::execute(none.artifact, std::vector<HostTensor>{}),
               {"step.check_finite", "0 operands is not a valid count"});
}

TEST(Executor, AttributesByTheirOdsNames) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t y = p.argument("y", In, F32, {2, 3});
  int64_t tr = p.transient(F32, {3, 2}, 0);
  int64_t mm = p.transient(F32, {2, 2}, 32);
  int64_t rs = p.transient(F32, {2, 1}, 48);
  int64_t bc = p.transient(F32, {2, 3}, 64);
  int64_t lt = p.transient(DType::I1, {2, 3}, 96);
  int64_t ge = p.transient(F32, {2, 3}, 104);
  int64_t io = p.transient(DType::I32, {2, 3}, 128);
  int64_t sl = p.transient(F32, {1, 2}, 152);
  int64_t pd = p.transient(F32, {2, 5}, 160);
  p.step("step.transpose", {{"permutation", {1, 0}}}, {x}, {tr});
  p.step("step.matmul", {{"transpose_b", true}}, {x, y}, {mm});
  p.step("step.reduce_sum", {{"dims", {1}}, {"keepdim", true}}, {x}, {rs});
  p.step("step.broadcast_in_dim", {{"broadcast_dimensions", {0, 1}}}, {rs},
         {bc});
  p.step("step.compare", {{"direction", "lt"}}, {x, bc}, {lt});
  p.step("step.gelu", {{"approximate", "tanh"}}, {x}, {ge});
  p.step("step.iota", {{"dimension", 1}}, {}, {io});
  p.step("step.slice",
         {{"start", {0, 1}}, {"limit", {2, 3}}, {"strides", {2, 1}}}, {x},
         {sl});
  p.step("step.pad", {{"low", {0, 1}}, {"high", {0, 1}}, {"value", -1.0}},
         {x}, {pd});
  for (int64_t id : {tr, mm, rs, bc, lt, ge, io, sl, pd})
    p.result(id, "r" + std::to_string(id));
  auto r = cpu::execute(p.artifact, {x23(), y23()});
  expectExact(r[0], F32, {3, 2}, {1, 4, 2, 5, 3, 6});
  expectExact(r[1], F32, {2, 2}, {140, 320, 320, 770});
  expectExact(r[2], F32, {2, 1}, {6, 15});
  expectExact(r[3], F32, {2, 3}, {6, 6, 6, 15, 15, 15});
  expectExact(r[4], DType::I1, {2, 3}, {1, 1, 1, 1, 1, 1});
  EXPECT_TRUE(r[5].bitwiseEqual(cpu::unary(cpu::UnaryOp::GeluTanh, x23())));
  expectExact(r[6], DType::I32, {2, 3}, {0, 1, 2, 0, 1, 2});
  expectExact(r[7], F32, {1, 2}, {2, 3});
  expectExact(r[8], F32, {2, 5}, {-1, 1, 2, 3, -1, -1, 4, 5, 6, -1});
}

TEST(Executor, ResultBufferDecidesCastAndReshape) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t c = p.transient(DType::BF16, {2, 3}, 0);
  int64_t s = p.transient(DType::BF16, {3, 2}, 16);
  p.step("step.cast", {}, {x}, {c});
  p.step("step.reshape", {}, {c}, {s});
  p.result(s, "out");
  auto r = cpu::execute(p.artifact, {x23()});
  expectExact(r[0], DType::BF16, {3, 2}, {1, 2, 3, 4, 5, 6});
}

TEST(Executor, OptimizerDefaultsAreTheOps) {
  // adamw_update without attributes uses the ODS defaults (PyTorch's).
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {3});
  int64_t g = p.argument("g", In, F32, {3});
  int64_t m = p.argument("m", BufferKind::State, F32, {3});
  int64_t v = p.argument("v", BufferKind::State, F32, {3});
  int64_t step = p.constant(make(DType::I64, {}, {3}));
  int64_t lr = p.constant(make(F32, {}, {0.01}));
  int64_t w1 = p.transient(F32, {3}, 0), m1 = p.transient(F32, {3}, 16),
          v1 = p.transient(F32, {3}, 32);
  p.step("step.adamw_update", {}, {w, g, m, v, step, lr}, {w1, m1, v1});
  p.result(w1, "w");
  p.result(m1, "m");
  p.result(v1, "v");
  HostTensor wv = make(F32, {3}, {1, -2, 3}), gv = make(F32, {3}, {0.1, 0.2, -0.3}),
             mv = make(F32, {3}, {0.01, 0.02, 0.03}),
             vv = make(F32, {3}, {0.001, 0.002, 0.003});
  auto r = cpu::execute(p.artifact, {wv, gv, mv, vv});
  cpu::AdamResult want =
      cpu::adamwUpdate(wv, gv, mv, vv, make(DType::I64, {}, {3}),
                       make(F32, {}, {0.01}), cpu::AdamHyper{});
  EXPECT_TRUE(r[0].bitwiseEqual(want.param));
  EXPECT_TRUE(r[1].bitwiseEqual(want.expAvg));
  EXPECT_TRUE(r[2].bitwiseEqual(want.expAvgSq));

  // sgd_update with momentum: five operands, two results.
  PlanBuilder q;
  w = q.argument("w", BufferKind::Param, F32, {3});
  g = q.argument("g", In, F32, {3});
  int64_t buf = q.argument("buf", BufferKind::State, F32, {3});
  step = q.constant(make(DType::I64, {}, {2}));
  lr = q.constant(make(F32, {}, {0.5}));
  w1 = q.transient(F32, {3}, 0);
  int64_t b1 = q.transient(F32, {3}, 16);
  q.step("step.sgd_update", {{"momentum", 0.5}, {"nesterov", true}},
         {w, g, step, lr, buf}, {w1, b1});
  q.result(w1, "w");
  q.result(b1, "buf");
  r = cpu::execute(q.artifact, {wv, gv, mv});
  // buf = 0.5 * buf + g; g' = g + 0.5 * buf; w -= 0.5 * g'.
  expectValues(r[1], F32, {3}, {0.105, 0.21, -0.285});
  expectValues(r[0], F32, {3}, {1 - 0.5 * (0.1 + 0.0525),
                                -2 - 0.5 * (0.2 + 0.105),
                                3 - 0.5 * (-0.3 - 0.1425)});
}

TEST(Executor, AttributeErrorsNameTheStepAndKey) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t t = p.transient(F32, {3, 2}, 0);
  p.step("step.transpose", {}, {x}, {t});
  p.result(t, "out");
  EXPECT_ERROR(cpu::execute(p.artifact, {x23()}),
               {"plan step 0", "step.transpose", "'permutation'", "missing"});
  p.plan.steps[0].attrs = {{"permutation", "1,0"}};
  EXPECT_ERROR(cpu::execute(p.artifact, {x23()}),
               {"'permutation' must be an array of integers", "\"1,0\""});
  p.plan.steps[0].op = "step.gelu";
  p.plan.steps[0].attrs = {{"approximate", "fast"}};
  EXPECT_ERROR(cpu::execute(p.artifact, {x23()}),
               {"'approximate' must be one of \"none\" \"tanh\""});
}

TEST(Executor, KernelResultMustMatchItsBuffer) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {2, 3});
  int64_t t = p.transient(F32, {2, 3}, 0); // reduce_sum over dim 1 gives [2]
  p.step("step.reduce_sum", {{"dims", {1}}}, {x}, {t});
  p.result(t, "out");
  EXPECT_ERROR(cpu::execute(p.artifact, {x23()}),
               {"plan step 0", "result 0 is f32 [2]", "declared f32 [2, 3]"});
}

TEST(Executor, OperandAndLayoutChecks) {
  PlanBuilder p;
  int64_t x = p.argument("x", In, F32, {3});
  int64_t a = p.transient(F32, {3}, 0);
  int64_t b = p.transient(F32, {3}, 16);
  p.step("step.add", {}, {x}, {a});
  p.result(a, "out");
  EXPECT_ERROR(cpu::execute(p.artifact, {HostTensor(F32, {3})}),
               {"plan step 0 (step.add)", "1 operands is not a valid count"});
  p.plan.steps[0].operands = {x, b}; // b is never written
  EXPECT_ERROR(cpu::execute(p.artifact, {HostTensor(F32, {3})}),
               {"plan step 0", "is read before anything defines it"});
  p.plan.steps[0].operands = {x, 99};
  EXPECT_ERROR(cpu::execute(p.artifact, {HostTensor(F32, {3})}),
               {"buffer id 99 is out of range"});
  p.plan.steps[0].operands = {x, x};
  p.plan.arenaBytes = 20; // b at 16 needs 28 bytes
  EXPECT_ERROR(cpu::execute(p.artifact, {HostTensor(F32, {3})}),
               {"does not fit in the arena of 20 bytes"});

  PlanBuilder q;
  int64_t c = q.constant(make(F32, {2}, {1, 2}));
  q.result(c, "c");
  q.artifact.sections["constants"].resize(20);
  EXPECT_ERROR(cpu::execute(q.artifact, std::vector<HostTensor>{}),
               {"does not fit in the constants section of 20 bytes"});
  q.artifact.sections.clear();
  EXPECT_ERROR(cpu::execute(q.artifact, std::vector<HostTensor>{}),
               {"\"constants\" section, which is missing"});
}

TEST(Executor, KernelErrorsNameTheStep) {
  PlanBuilder p;
  int64_t idx = p.argument("idx", In, DType::I64, {2});
  int64_t table = p.argument("table", BufferKind::Param, F32, {4, 2});
  int64_t e = p.transient(F32, {2, 2}, 0);
  p.step("step.embedding", {}, {idx, table}, {e});
  p.result(e, "out");
  auto r = cpu::execute(p.artifact, {make(DType::I64, {2}, {3, 0}),
                                     make(F32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7})});
  expectExact(r[0], F32, {2, 2}, {6, 7, 0, 1});
  EXPECT_ERROR(cpu::execute(p.artifact, {make(DType::I64, {2}, {4, 0}),
                                         HostTensor(F32, {4, 2})}),
               {"plan step 0 (step.embedding)", "step.embedding"});
}

} // namespace
} // namespace step::rt::test
