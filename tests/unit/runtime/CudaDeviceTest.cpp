//===- CudaDeviceTest.cpp - The CUDA backend on a device ------------------===//
//
// The CUDA executor against the CPU backend on small hand-built plans: a
// PTX kernel, cuBLASLt matmuls, a copy, offload and reload copies, host
// steps, graph replay, eager launches and timed runs; and a Session whose
// params and state stay on the device between steps. The CudaDevice tests
// need a device and skip with the reason without one (label gpu); the
// CudaCopySchedule ones check their plans everywhere.
//
//===----------------------------------------------------------------------===//

#include "runtime/Npy.h"
#include "runtime/Session.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DynamicSymbols.h"

#include "PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace step::rt::cuda {
namespace {
using test::make;
using test::PlanBuilder;

//===----------------------------------------------------------------------===//
// On a GPU
//===----------------------------------------------------------------------===//

// out0[i] = in0[i] + in1[i] for 6 floats (nvcc -ptx -arch=compute_80, the
// .version lowered to 7.0 so drivers from CUDA 11 on can JIT it).
const char *kAddPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry step_test_add(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
  .reg .pred %p<2>;
  .reg .f32 %f<4>;
  .reg .b32 %r<5>;
  .reg .b64 %rd<11>;
  ld.param.u64 %rd1, [p0];
  ld.param.u64 %rd2, [p1];
  ld.param.u64 %rd3, [p2];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r1, %r2, %r3, %r4;
  setp.gt.s32 %p1, %r1, 5;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd4, %rd1;
  mul.wide.s32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  cvta.to.global.u64 %rd7, %rd2;
  add.s64 %rd8, %rd7, %rd5;
  ld.global.f32 %f1, [%rd8];
  ld.global.f32 %f2, [%rd6];
  add.f32 %f3, %f2, %f1;
  cvta.to.global.u64 %rd9, %rd3;
  add.s64 %rd10, %rd9, %rd5;
  st.global.f32 [%rd10], %f3;
DONE:
  ret;
}
)";

/// The PTX add as the kernel `step_test_add` of `p`'s artifact.
void addPtxAdd(PlanBuilder &p) {
  p.artifact.sections["ptx.step_test_add"] = kAddPtx;
  p.artifact.meta["kernels"]["step_test_add"] = {
      {"grid", 1}, {"block", 32}, {"shared_bytes", 0},
      {"params", {"in0", "in1", "out0"}}};
}

// The add through shared memory: in0[i] into a 1 KiB static array, in1[i]
// into the top of 48 KiB of dynamic shared memory (byte 49088 + 4i), their
// sum read back from both (ptxas: 1024 bytes smem on sm_80 and sm_90).
const char *kSharedAddPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 step_dyn[];
.visible .entry step_test_add_shared(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
  .shared .align 4 .b8 fixed[1024];
  .reg .pred %p<2>;
  .reg .f32 %f<4>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [p0];
  ld.param.u64 %rd2, [p1];
  ld.param.u64 %rd3, [p2];
  mov.u32 %r1, %tid.x;
  setp.gt.u32 %p1, %r1, 5;
  @%p1 bra DONE;
  mul.wide.u32 %rd4, %r1, 4;
  cvta.to.global.u64 %rd5, %rd1;
  add.s64 %rd5, %rd5, %rd4;
  ld.global.f32 %f1, [%rd5];
  cvta.to.global.u64 %rd6, %rd2;
  add.s64 %rd6, %rd6, %rd4;
  ld.global.f32 %f2, [%rd6];
  mov.u64 %rd7, fixed;
  add.s64 %rd7, %rd7, %rd4;
  st.shared.f32 [%rd7], %f1;
  mov.u64 %rd8, step_dyn;
  add.s64 %rd8, %rd8, %rd4;
  st.shared.f32 [%rd8+49088], %f2;
  ld.shared.f32 %f1, [%rd7];
  ld.shared.f32 %f2, [%rd8+49088];
  add.f32 %f3, %f1, %f2;
  cvta.to.global.u64 %rd9, %rd3;
  add.s64 %rd9, %rd9, %rd4;
  st.global.f32 [%rd9], %f3;
DONE:
  ret;
}
)";

/// h = x + c (PTX kernel); y = h w; z = h w2^T; b = hb w (batched, shared
/// rhs, transposed lhs); r = reshape(y).
Artifact devicePlan() {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {3, 4});
  int64_t w2 = p.argument("w2", BufferKind::Param, F32, {5, 3});
  int64_t x = p.argument("x", BufferKind::Input, F32, {2, 3});
  int64_t hb = p.argument("hb", BufferKind::Input, F32, {2, 3, 2});
  int64_t c = p.constant(make(F32, {2, 3}, {0.5, -1, 2, 0.25, 3, -0.75}));
  int64_t h = p.transient(F32, {2, 3}, 0);
  int64_t y = p.transient(F32, {2, 4}, 32);
  int64_t z = p.transient(F32, {2, 5}, 64);
  int64_t b = p.transient(F32, {2, 2, 4}, 112);
  int64_t r = p.transient(F32, {8}, 176);
  p.step("step.add", {}, {x, c}, {h});
  p.plan.steps.back().kernel = "step_test_add";
  p.step("step.matmul", {}, {h, w}, {y});
  p.step("step.matmul", {{"transpose_b", true}}, {h, w2}, {z});
  p.step("step.matmul", {{"transpose_a", true}}, {hb, w}, {b});
  p.step("step.reshape", {}, {y}, {r});
  p.result(r, "loss"); // not a scalar: run() does not care
  p.result(z, "z");
  p.result(b, "b");
  p.result(h, "h");
  addPtxAdd(p);
  return p.artifact;
}

/// The PTX add with activations offloaded and reloaded, laid out as
/// step-offload and step-memory-plan would (every value is f32 [2, 3]):
///   0 h = x + c      @0         5 r = reload(hh)  @32 (y's bytes)
///   1 hx = offload(x) host @32  6 v = reshape(r)  @32 (a view: the join)
///   2 y = x + h      @32        7 w = z + r       @64
///   3 hh = offload(h) host @0   8 rx = reload(hx) @96 (joined at the end)
///   4 z = y + y      @0 (h's bytes, free after step 3)
Artifact offloadPlan() {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {2, 3});
  int64_t c = p.constant(make(F32, {2, 3}, {0.5, -1, 2, 0.25, 3, -0.75}));
  int64_t h = p.transient(F32, {2, 3}, 0);
  int64_t hx = p.host(F32, {2, 3}, 32);
  int64_t y = p.transient(F32, {2, 3}, 32);
  int64_t hh = p.host(F32, {2, 3}, 0);
  int64_t z = p.transient(F32, {2, 3}, 0);
  int64_t r = p.transient(F32, {2, 3}, 32);
  int64_t v = p.transient(F32, {6}, 32);
  int64_t w = p.transient(F32, {2, 3}, 64);
  int64_t rx = p.transient(F32, {2, 3}, 96);
  auto add = [&](int64_t a, int64_t b, int64_t out) {
    p.step("step.add", {}, {a, b}, {out});
    p.plan.steps.back().kernel = "step_test_add";
  };
  add(x, c, h);
  p.step("step.offload", {}, {x}, {hx});
  add(x, h, y);
  p.step("step.offload", {}, {h}, {hh});
  add(y, y, z);
  p.step("step.reload", {}, {hh}, {r});
  p.step("step.reshape", {}, {r}, {v});
  add(z, r, w);
  p.step("step.reload", {}, {hx}, {rx});
  p.result(w, "w");
  p.result(z, "z");
  p.result(v, "v");
  p.result(rx, "rx");
  addPtxAdd(p);
  return p.artifact;
}

/// ZeRO-Offload's shape (step-offload-optimizer) around the PTX add,
/// every value f32 [2, 3]; w (param) and m (state) live in host memory:
///   0 wd = reload(w)        @0      4 hn = hs + c   host step, host @64
///   1 g = x + wd            @32     5 nd = reload(hn) @0
///   2 gh = offload(g)  host @0      6 y = nd + x    @64
///   3 hs = gh + m      host step, host @32
/// Results: y, w = hn, m = hs (the last two read from host memory).
Artifact hostStepPlan() {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {2, 3});
  int64_t m = p.argument("m", BufferKind::State, F32, {2, 3});
  int64_t x = p.argument("x", BufferKind::Input, F32, {2, 3});
  p.plan.buffers[w].host = p.plan.buffers[m].host = true;
  int64_t c = p.constant(make(F32, {2, 3}, {0.5, -1, 2, 0.25, 3, -0.75}));
  int64_t wd = p.transient(F32, {2, 3}, 0);
  int64_t g = p.transient(F32, {2, 3}, 32);
  int64_t gh = p.host(F32, {2, 3}, 0);
  int64_t hs = p.host(F32, {2, 3}, 32);
  int64_t hn = p.host(F32, {2, 3}, 64);
  int64_t nd = p.transient(F32, {2, 3}, 0);
  int64_t y = p.transient(F32, {2, 3}, 64);
  auto add = [&](int64_t a, int64_t b, int64_t out, bool host) {
    p.step("step.add", {}, {a, b}, {out});
    if (host)
      p.plan.steps.back().host = true;
    else
      p.plan.steps.back().kernel = "step_test_add";
  };
  p.step("step.reload", {}, {w}, {wd});
  add(x, wd, g, false);
  p.step("step.offload", {}, {g}, {gh});
  add(gh, m, hs, true);
  add(hs, c, hn, true);
  p.step("step.reload", {}, {hn}, {nd});
  add(nd, x, y, false);
  p.result(y, "loss");
  p.result(hn, "w");
  p.result(hs, "m");
  addPtxAdd(p);
  return p.artifact;
}

/// A training step whose params and state a Session carries on the device,
/// every value f32 [2, 3] but the reshapes and the loss:
///   0 m1 = m + x            @0    3 xr = reshape(x) [6, 1]   @96
///   1 w1 = w + m1           @32   4 loss = wr xr [1, 1]      @128
///   2 wr = reshape(w1) [1, 6] @64
/// Results: loss, w = w1, m = m1, and k = k: a param returned as it is
/// (the result is the argument's own buffer, nothing to copy back).
/// bucketT > 0: the plan of bucket T = bucketT of a step with a symbolic
/// dim T, which only an unused input y [T] (and the valid length len.T)
/// has (docs/dynamic-shapes.md).
/// `donateM`: m's update written into m's own buffer (a donated result,
/// compiler/pipeline/Donation.cpp), as stepc plans a fused update.
Artifact carriedStepPlan(int64_t bucketT = 0, bool donateM = false) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {2, 3});
  int64_t k = p.argument("k", BufferKind::Param, F32, {2, 3});
  int64_t m = p.argument("m", BufferKind::State, F32, {2, 3});
  int64_t x = p.argument("x", BufferKind::Input, F32, {2, 3});
  if (bucketT > 0) {
    p.argument("y", BufferKind::Input, F32, {bucketT});
    p.argument("len.T", BufferKind::Input, DType::I64, {});
    p.artifact.meta["dynamic"] = {{"symbols", {{"T", 4}}},
                                  {"inputs", {{"y", {"T"}}}}};
    p.artifact.meta["bucket"] = {{"T", bucketT}};
  }
  int64_t m1 = donateM ? m : p.transient(F32, {2, 3}, 0);
  int64_t w1 = p.transient(F32, {2, 3}, 32);
  int64_t wr = p.transient(F32, {1, 6}, 64);
  int64_t xr = p.transient(F32, {6, 1}, 96);
  int64_t loss = p.transient(F32, {1, 1}, 128);
  auto add = [&](int64_t a, int64_t b, int64_t out) {
    p.step("step.add", {}, {a, b}, {out});
    p.plan.steps.back().kernel = "step_test_add";
  };
  add(m, x, m1);
  add(w, m1, w1);
  p.step("step.reshape", {}, {w1}, {wr});
  p.step("step.reshape", {}, {x}, {xr});
  p.step("step.matmul", {}, {wr, xr}, {loss});
  p.result(loss, "loss");
  p.result(w1, "w");
  p.result(m1, "m");
  p.result(k, "k");
  addPtxAdd(p);
  return p.artifact;
}

/// f32 [2, 3] of small values in [-1 + shift, 1.5 + shift].
HostTensor seq23(double shift) {
  HostTensor t(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    t.setFromDouble(i, 0.25 * static_cast<double>((i * 7) % 11) - 1 + shift);
  return t;
}

// The Session test's plan where there is no GPU: the CPU backend takes
// it and computes loss = sum((w + x) * x), w += m + x, m += x, k as is.
TEST(CudaCopySchedule, CarriedStepPlanIsWellFormed) {
  Session s(carriedStepPlan(), {Backend::Cpu});
  s.set("w", seq23(0.5));
  s.set("k", seq23(-0.25));
  HostTensor x = seq23(0.125), w = seq23(0.5);
  double loss = 0;
  std::vector<double> w1;
  for (int64_t i = 0; i < 6; ++i) {
    double xi = x.getAsDouble(i), wi = w.getAsDouble(i) + xi;
    loss += wi * xi;
    w1.push_back(wi);
  }
  EXPECT_NEAR(s.step({{"x", x}}), loss, 1e-5 * (1 + std::abs(loss)));
  test::expectValues(s.get("w"), DType::F32, {2, 3}, w1);
  test::expectValues(s.get("m"), DType::F32, {2, 3}, test::values(x));
  EXPECT_TRUE(s.get("k").bitwiseEqual(seq23(-0.25)));
}

/// The carried step with buckets T = 4 (the artifact) and T = 2.
Artifact bucketedCarriedStep() {
  Artifact a = carriedStepPlan(4);
  a.buckets.push_back(carriedStepPlan(2));
  return a;
}

/// A batch of bucketedCarriedStep of valid length t.
std::map<std::string, HostTensor> bucketBatch(int n, int64_t t) {
  return {{"x", seq23(0.125 * n)}, {"y", HostTensor(DType::F32, {t})}};
}

TEST(CudaCopySchedule, BucketedCarriedStepIsWellFormed) {
  Session s(bucketedCarriedStep(), {Backend::Cpu});
  EXPECT_EQ(s.inputNames(), (std::vector<std::string>{"x", "y"}));
  s.set("w", seq23(0.5));
  s.set("k", seq23(-0.25));
  s.step(bucketBatch(1, 3));
  s.step(bucketBatch(2, 1));
  EXPECT_EQ(s.bucketsUsed(), 2u);
  // m += x twice, whichever bucket ran.
  HostTensor x1 = seq23(0.125), x2 = seq23(0.25);
  std::vector<double> m;
  for (int64_t i = 0; i < 6; ++i)
    m.push_back(x1.getAsDouble(i) + x2.getAsDouble(i));
  test::expectValues(s.get("m"), DType::F32, {2, 3}, m);
}

std::vector<HostTensor> hostStepArgs(double shift) {
  std::vector<HostTensor> args;
  for (int k = 0; k < 3; ++k) {
    HostTensor t(DType::F32, {2, 3});
    for (int64_t i = 0; i < 6; ++i)
      t.setFromDouble(i, 0.25 * static_cast<double>((i * 7 + k) % 11) - 1 +
                             shift);
    args.push_back(std::move(t));
  }
  return args;
}

TEST(CudaCopySchedule, HostStepPlanIsWellFormed) {
  Artifact a = hostStepPlan();
  ASSERT_NO_THROW(a.plan.validate());
  // Host steps need no kernel; the device steps have theirs.
  EXPECT_TRUE(hasDeviceCode(a.plan));
  EXPECT_EQ(launchCount(a.plan), 5); // 7 steps, 2 on the host
  CopySchedule s = copySchedule(a.plan);
  ASSERT_EQ(s.reloads.size(), 2u);
  EXPECT_EQ(s.reloads[0].step, 0); // a host param: no writer
  EXPECT_EQ(s.reloads[0].waitBefore, 1);
  EXPECT_EQ(s.reloads[1].step, 5); // a host step's result
  EXPECT_EQ(s.reloads[1].waitBefore, 6);
  ASSERT_EQ(s.offloads.size(), 1u);
  EXPECT_EQ(s.offloads[0].issueAfter, 1);
  std::vector<HostTensor> args = hostStepArgs(0);
  std::vector<HostTensor> out = cpu::execute(a, args);
  ASSERT_EQ(out.size(), 3u);
  const double c[] = {0.5, -1, 2, 0.25, 3, -0.75};
  std::vector<double> y, w, m;
  for (int64_t i = 0; i < 6; ++i) {
    double x = args[2].getAsDouble(i);
    double hs = x + args[0].getAsDouble(i) + args[1].getAsDouble(i);
    m.push_back(hs);
    w.push_back(hs + c[i]);
    y.push_back(hs + c[i] + x);
  }
  test::expectValues(out[0], DType::F32, {2, 3}, y);
  test::expectValues(out[1], DType::F32, {2, 3}, w);
  test::expectValues(out[2], DType::F32, {2, 3}, m);
}

// The GPU test's plan, checked where there is no GPU: it is valid, its
// copies fork and join where the comments above say, and the CPU backend
// runs it.
TEST(CudaCopySchedule, OffloadDevicePlanIsWellFormed) {
  Artifact a = offloadPlan();
  ASSERT_NO_THROW(a.plan.validate());
  EXPECT_TRUE(hasDeviceCode(a.plan));
  CopySchedule s = copySchedule(a.plan);
  ASSERT_EQ(s.offloads.size(), 2u);
  EXPECT_EQ(s.offloads[0].issueAfter, -1);
  EXPECT_EQ(s.offloads[1].issueAfter, 0);
  ASSERT_EQ(s.reloads.size(), 2u);
  EXPECT_EQ(s.reloads[0].waitBefore, 6);
  EXPECT_EQ(s.reloads[1].waitBefore, 9);
  HostTensor x = make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<HostTensor> out = cpu::execute(a, {x});
  ASSERT_EQ(out.size(), 4u);
  // h = x + c; y = x + h; z = 2y; w = z + h (reloaded); v = h; rx = x.
  test::expectValues(out[0], DType::F32, {2, 3},
                     {6.5, 7, 21, 20.75, 34, 27.75});
  test::expectValues(out[1], DType::F32, {2, 3}, {5, 6, 16, 16.5, 26, 22.5});
  test::expectValues(out[2], DType::F32, {6}, {1.5, 1, 5, 4.25, 8, 5.25});
  test::expectValues(out[3], DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
}

std::vector<HostTensor> deviceArgs(double shift) {
  auto seq = [&](Shape s) {
    HostTensor t(DType::F32, s);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setFromDouble(i, 0.25 * static_cast<double>((i * 7) % 11) - 1 + shift);
    return t;
  };
  return {seq({3, 4}), seq({5, 3}), seq({2, 3}), seq({2, 3, 2})};
}

class CudaDevice : public ::testing::Test {
protected:
  void SetUp() override {
    Availability a = available();
    if (!a.ok)
      GTEST_SKIP() << "no CUDA device: " << a.reason;
  }
};

void expectClose(const std::vector<HostTensor> &gpu,
                 const std::vector<HostTensor> &cpu) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    ASSERT_EQ(gpu[i].shape(), cpu[i].shape()) << "result " << i;
    // f32 products of K <= 3 terms in [-1.5, 2]: cuBLASLt may sum in another
    // order than OpenBLAS, a few ulp; 1e-5 relative covers it.
    for (int64_t j = 0; j < gpu[i].numel(); ++j)
      EXPECT_NEAR(gpu[i].getAsDouble(j), cpu[i].getAsDouble(j),
                  1e-5 * (1 + std::abs(cpu[i].getAsDouble(j))))
          << "result " << i << " element " << j;
  }
}

TEST_F(CudaDevice, MatchesCpuBackendWithGraphReplay) {
  Artifact a = devicePlan();
  CudaExecutor gpu(a);
  EXPECT_EQ(gpu.arch().rfind("sm_", 0), 0u);
  for (double shift : {0.0, 0.5}) { // the second run replays the graph
    std::vector<HostTensor> args = deviceArgs(shift);
    expectClose(gpu.run(args), cpu::execute(a, args));
  }
}

// step-run --tune-matmuls: cuBLASLt's candidates timed before the first
// run on the step's buffers; the results are the heuristic's, within the
// same tolerance, and the graph replays the choice.
TEST_F(CudaDevice, TunedMatmulsMatchCpuBackend) {
  Artifact a = devicePlan();
  CudaExecutorOptions o;
  o.tuneMatmuls = true;
  CudaExecutor gpu(a, o);
  for (double shift : {0.0, 0.5}) {
    std::vector<HostTensor> args = deviceArgs(shift);
    expectClose(gpu.run(args), cpu::execute(a, args));
  }
}

// --tune-cache: the first tuned executor writes its picks; a second one on
// the same file takes them without timing and computes the first's bits.
TEST_F(CudaDevice, TunedPicksAreKeptForTheNextRun) {
  Artifact a = devicePlan();
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("step-tune-cache-" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(path);
  CudaExecutorOptions o;
  o.tuneMatmuls = true;
  o.tuneCache = path.string();
  std::vector<HostTensor> args = deviceArgs(0.25), first, second;
  std::pair<int, int> tuned, reused;
  {
    CudaExecutor gpu(a, o);
    first = gpu.run(args);
    tuned = gpu.matmulTuning();
  }
  if (tuned.first == 0)
    GTEST_SKIP() << "cuBLASLt offered one algorithm for every shape: "
                    "nothing was tuned, nothing kept";
  EXPECT_EQ(tuned.second, 0);
  ASSERT_TRUE(std::filesystem::exists(path));
  {
    CudaExecutor gpu(a, o);
    second = gpu.run(args);
    reused = gpu.matmulTuning();
  }
  std::filesystem::remove(path);
  // Every shape timed the first time comes from the file the second.
  EXPECT_EQ(reused, std::make_pair(0, tuned.first));
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_EQ(first[i].byteSize(), second[i].byteSize());
    EXPECT_EQ(std::memcmp(first[i].raw(), second[i].raw(),
                          first[i].byteSize()),
              0)
        << "result " << i;
  }
}

TEST_F(CudaDevice, MatchesCpuBackendWithoutGraph) {
  Artifact a = devicePlan();
  CudaExecutorOptions o;
  o.useGraph = false;
  CudaExecutor gpu(a, o);
  std::vector<HostTensor> args = deviceArgs(0.25);
  expectClose(gpu.run(args), cpu::execute(a, args));
}

// What the executor reports holding: its allocations cover the planned
// arena (plus params, inputs, workspace), and cuMemGetInfo saw at least
// that much taken (allocations are rounded up by the driver, never down).
TEST_F(CudaDevice, ReportsItsDeviceMemory) {
  Artifact a = devicePlan();
  CudaExecutor gpu(a);
  gpu.run(deviceArgs(0.5));
  DeviceMemory m = gpu.memory();
  EXPECT_EQ(m.arenaBytes, a.plan.arenaBytes);
  EXPECT_GE(m.allocatedBytes, a.plan.arenaBytes);
  ASSERT_GE(m.measuredBytes, 0) << "cuMemGetInfo gave nothing";
  EXPECT_GE(m.measuredBytes, m.allocatedBytes);
  EXPECT_GT(m.totalBytes, m.measuredBytes);
}

// A timed run (step-run --trace / --profile, docs/profiling.md): the ops
// recorded one by one with timing events give the graph's results, and
// every step that launches something has a span, in plan order, each
// inside the run and after the one before.
TEST_F(CudaDevice, TimedRunMatchesGraphAndTimesEachStep) {
  Artifact a = devicePlan();
  CudaExecutor gpu(a);
  std::vector<HostTensor> args = deviceArgs(0.5);
  std::vector<const HostTensor *> ptrs;
  for (const HostTensor &t : args)
    ptrs.push_back(&t);
  std::vector<HostTensor> graph = gpu.run(args);
  RunTimeline timeline;
  expectClose(gpu.run(ptrs, &timeline), graph);
  // The executor's own copy of the plan.
  ASSERT_NE(timeline.plan, nullptr);
  ASSERT_EQ(timeline.plan->steps.size(), a.plan.steps.size());
  ASSERT_FALSE(timeline.spans.empty());
  int64_t launched = 0;
  for (const PlanStep &s : a.plan.steps)
    launched += !isView(a.plan, s);
  EXPECT_EQ(static_cast<int64_t>(timeline.spans.size()), launched);
  double previous = timeline.start;
  for (size_t i = 0; i < timeline.spans.size(); ++i) {
    const StepSpan &s = timeline.spans[i];
    if (i > 0) {
      EXPECT_GT(s.index, timeline.spans[i - 1].index);
    }
    EXPECT_DOUBLE_EQ(s.start, previous);
    EXPECT_GE(s.end, s.start);
    EXPECT_LE(s.end, timeline.end);
    previous = s.end;
  }
  // The graph still replays afterwards, with the same results.
  expectClose(gpu.run(args), graph);
}

// Offload and reload copies forked onto the copy streams and joined back:
// the graph (captured once, replayed with other inputs) and the eager
// launches give what the CPU backend gives.
TEST_F(CudaDevice, OffloadAndReloadMatchCpuBackend) {
  Artifact a = offloadPlan();
  for (bool useGraph : {true, false}) {
    CudaExecutorOptions o;
    o.useGraph = useGraph;
    CudaExecutor gpu(a, o);
    for (double shift : {0.0, 0.5, -0.25}) {
      std::vector<HostTensor> args = {deviceArgs(shift)[2]}; // f32 [2, 3]
      SCOPED_TRACE(std::string(useGraph ? "graph" : "eager") + ", shift " +
                   std::to_string(shift));
      expectClose(gpu.run(args), cpu::execute(a, args));
    }
  }
}

// Host-memory params and state, host steps as host functions in the
// graph, reloads of their results: as the CPU backend, graph and eager.
TEST_F(CudaDevice, HostStepsMatchCpuBackend) {
  Artifact a = hostStepPlan();
  for (bool useGraph : {true, false}) {
    CudaExecutorOptions o;
    o.useGraph = useGraph;
    CudaExecutor gpu(a, o);
    for (double shift : {0.0, 0.5, -0.25}) {
      std::vector<HostTensor> args = hostStepArgs(shift);
      SCOPED_TRACE(std::string(useGraph ? "graph" : "eager") + ", shift " +
                   std::to_string(shift));
      expectClose(gpu.run(args), cpu::execute(a, args));
    }
  }
}

// Params and state carried on the device between steps (only the loss
// comes back each step) read back by get() and save_params as the CPU
// backend computes them, also across a set() and a load_params().
TEST_F(CudaDevice, SessionKeepsParamsAndStateOnDevice) {
  Artifact a = carriedStepPlan();
  Session gpu(a, {Backend::Cuda}), cpu(a, {Backend::Cpu});
  ASSERT_EQ(gpu.backend(), Backend::Cuda);
  const std::vector<std::string> names = {"w", "k", "m"};
  for (Session *s : {&gpu, &cpu}) {
    s->set("w", seq23(0.5));
    s->set("k", seq23(-0.25));
  }
  auto expectSame = [&](const std::string &when) {
    SCOPED_TRACE(when);
    for (const std::string &name : names) {
      const HostTensor &g = gpu.get(name), &c = cpu.get(name);
      ASSERT_EQ(g.dtype(), c.dtype()) << name;
      ASSERT_EQ(g.shape(), c.shape()) << name;
      // f32 sums of a few terms in the same order on both backends: the
      // adds are exact alike; 1e-5 relative as the tests above allow.
      for (int64_t j = 0; j < c.numel(); ++j)
        EXPECT_NEAR(g.getAsDouble(j), c.getAsDouble(j),
                    1e-5 * (1 + std::abs(c.getAsDouble(j))))
            << name << " element " << j;
    }
  };
  auto step = [&](int n) {
    std::map<std::string, HostTensor> batch = {{"x", seq23(0.125 * n)}};
    double g = gpu.step(batch), c = cpu.step(batch);
    // A dot product of 6 terms: cuBLASLt may sum in another order.
    EXPECT_NEAR(g, c, 1e-5 * (1 + std::abs(c))) << "step " << n;
  };
  step(1);
  expectSame("after step 1");
  step(2); // from the device copies get() left current
  step(3);
  expectSame("after step 3");
  for (Session *s : {&gpu, &cpu})
    s->set("w", seq23(-0.75)); // m stays: downloaded, then uploaded again
  expectSame("after set");
  step(4);
  expectSame("after a step from set");
  step(5);
  test::TempDir dir;
  gpu.save_params(dir.path.string());
  for (const std::string &name : names)
    EXPECT_TRUE(rt::readNpy(dir / (name + ".npy")).bitwiseEqual(gpu.get(name)))
        << name;
  expectSame("after step 5");
  // A second session from the saved files steps as the first goes on.
  Session loaded(a, {Backend::Cuda});
  loaded.load_params(dir.path.string());
  std::map<std::string, HostTensor> batch = {{"x", seq23(1)}};
  EXPECT_EQ(loaded.step(batch), gpu.step(batch));
  cpu.step(batch);
  for (const std::string &name : names)
    EXPECT_TRUE(loaded.get(name).bitwiseEqual(gpu.get(name))) << name;
  expectSame("after step 6");
}

/// The carried plans' params and state (w, k, m) of the two sessions within
/// 1e-5 relative (f32 sums of a few terms, cuBLASLt's order).
void expectSameParams(Session &gpu, Session &cpu) {
  for (const char *name : {"w", "k", "m"}) {
    const HostTensor &g = gpu.get(name), &c = cpu.get(name);
    for (int64_t j = 0; j < c.numel(); ++j)
      EXPECT_NEAR(g.getAsDouble(j), c.getAsDouble(j),
                  1e-5 * (1 + std::abs(c.getAsDouble(j))))
          << name << " element " << j;
  }
}

// A donated update (the result is its argument's buffer): nothing to
// commit, the next step reads the update in place, as the CPU backend
// computes with its copy on write.
TEST_F(CudaDevice, SessionWithADonatedUpdateMatchesCpuBackend) {
  Artifact a = carriedStepPlan(0, /*donateM=*/true);
  Session gpu(a, {Backend::Cuda}), cpu(a, {Backend::Cpu});
  ASSERT_EQ(gpu.backend(), Backend::Cuda);
  for (Session *s : {&gpu, &cpu}) {
    s->set("w", seq23(0.5));
    s->set("k", seq23(-0.25));
  }
  for (int n = 1; n <= 3; ++n) {
    std::map<std::string, HostTensor> batch = {{"x", seq23(0.125 * n)}};
    double g = gpu.step(batch), c = cpu.step(batch);
    EXPECT_NEAR(g, c, 1e-5 * (1 + std::abs(c))) << "step " << n;
  }
  expectSameParams(gpu, cpu);
}

// Steps alternating between two buckets: the params and state pass from
// one bucket's executor to the other's on the device (Session::handOver)
// and stay equal to the CPU backend's.
TEST_F(CudaDevice, BucketsHandParamsAndStateOverOnTheDevice) {
  Artifact a = bucketedCarriedStep();
  Session gpu(a, {Backend::Cuda}), cpu(a, {Backend::Cpu});
  ASSERT_EQ(gpu.backend(), Backend::Cuda);
  for (Session *s : {&gpu, &cpu}) {
    s->set("w", seq23(0.5));
    s->set("k", seq23(-0.25));
  }
  const int64_t lengths[] = {4, 1, 2, 3, 1, 4};
  for (int n = 0; n < 6; ++n) {
    auto batch = bucketBatch(n, lengths[n]);
    double g = gpu.step(batch), c = cpu.step(batch);
    EXPECT_NEAR(g, c, 1e-5 * (1 + std::abs(c))) << "step " << n;
  }
  EXPECT_EQ(gpu.bucketsUsed(), 2u);
  expectSameParams(gpu, cpu);
}

// A kernel with static shared memory whose launch asks for 48 KiB of
// dynamic bytes: 49 KiB a block in all, which needs the function's opt-in
// (without it the launch fails with CUDA_ERROR_INVALID_VALUE: the runtime
// once opted in only for dynamic bytes over 48 KiB). More than the device
// allows a block is refused by name before any launch.
TEST_F(CudaDevice, StaticAndDynamicSharedMemoryOver48KiBLaunch) {
  Artifact a = devicePlan();
  a.sections["ptx.step_test_add_shared"] = kSharedAddPtx;
  a.meta["kernels"]["step_test_add_shared"] = {
      {"grid", 1}, {"block", 32}, {"shared_bytes", 48 * 1024},
      {"params", {"in0", "in1", "out0"}}};
  a.plan.steps.front().kernel = "step_test_add_shared";
  CudaExecutor gpu(a);
  std::vector<HostTensor> args = deviceArgs(0.25);
  expectClose(gpu.run(args), cpu::execute(a, args));

  a.meta["kernels"]["step_test_add_shared"]["shared_bytes"] = 1 << 20;
  EXPECT_ERROR(CudaExecutor e(a),
               {"plan step 0 (step.add)", "step_test_add_shared",
                "1049600 bytes of shared memory a block (1024 static, "
                "1048576 dynamic); this device allows"});
}

TEST_F(CudaDevice, RefusesStepsWithoutDeviceCode) {
  // sgdStep packs its transients 8-byte aligned (enough for the CPU
  // backend); give each its own 256-byte aligned slot so the alignment
  // check passes and the missing kernel is what is refused.
  Artifact plain = test::sgdStep();
  int64_t end = 0;
  for (BufferDesc &b : plain.plan.buffers)
    if (b.kind == BufferKind::Transient) {
      b.offset = end;
      end += (b.bytes() + 255) / 256 * 256;
    }
  plain.plan.arenaBytes = end;
  EXPECT_ERROR(CudaExecutor e(plain),
               {"plan step 0 (step.add)", "no CUDA kernel"});
  Artifact a = devicePlan();
  a.sections.erase("ptx.step_test_add");
  EXPECT_ERROR(CudaExecutor e(a), {"artifact has no kernels for sm_"});
}

} // namespace
} // namespace step::rt::cuda
