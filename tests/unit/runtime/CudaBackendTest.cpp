//===- CudaBackendTest.cpp - The CUDA backend (runtime/cuda) --------------===//
//
// Two groups. CudaSymbols/CudaLayout/CudaKernelImage run everywhere: library
// loading and its failure reasons (against the toolkit's driver stub, which
// exports every symbol but has no driver behind it), kernel image selection
// and the cuBLASLt layouts, all without a GPU. CudaDevice needs a GPU (ctest
// label `gpu`) and skips with the reason from available() otherwise: it runs
// a hand-built plan (a PTX kernel and three matmuls) on the GPU and the CPU
// reference backend and compares them.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Executor.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DynamicSymbols.h"

#include "PlanTestUtil.h"

#include <gtest/gtest.h>

namespace step::rt::cuda {
namespace {
using test::make;
using test::PlanBuilder;

//===----------------------------------------------------------------------===//
// Symbol loading
//===----------------------------------------------------------------------===//

TEST(CudaSymbols, MissingLibraryGivesReason) {
  std::string reason;
  EXPECT_EQ(DriverSymbols::load({"libstep-no-such-cuda.so.1"}, &reason),
            nullptr);
  EXPECT_NE(reason.find("the CUDA driver library could not be loaded"),
            std::string::npos) << reason;
  EXPECT_NE(reason.find("libstep-no-such-cuda.so.1"), std::string::npos)
      << reason;
  EXPECT_EQ(CublasLtSymbols::load({"libstep-no-such-lt.so"}, &reason), nullptr);
  EXPECT_NE(reason.find("cuBLASLt could not be loaded"), std::string::npos);
}

TEST(CudaSymbols, AvailabilityHasReasonWhenUnavailable) {
  Availability a = available();
  if (a.ok) {
    EXPECT_TRUE(a.reason.empty());
    EXPECT_NE(driver(), nullptr);
  } else {
    EXPECT_FALSE(a.reason.empty());
  }
}

#ifdef STEP_CUDA_STUB_DRIVER
// The stub resolves every (versioned) symbol the table names, so this checks
// the names against the toolkit's library, and cuInit reports the stub.
TEST(CudaSymbols, StubDriverResolvesAndReportsNoDriver) {
  std::string reason;
  auto d = DriverSymbols::load({STEP_CUDA_STUB_DRIVER}, &reason);
  ASSERT_NE(d, nullptr) << reason;
  Availability a = probeDevices(*d);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("stub library"), std::string::npos) << a.reason;
}
#endif

#ifdef STEP_CUDA_CUBLASLT
TEST(CudaSymbols, CublasLtResolves) {
  std::string reason;
  auto lt = CublasLtSymbols::load({STEP_CUDA_CUBLASLT}, &reason);
  ASSERT_NE(lt, nullptr) << reason;
  EXPECT_GE(lt->cublasLtGetVersion(), 120000u);
  const char *ok = lt->cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS);
  ASSERT_NE(ok, nullptr);
  EXPECT_STRNE(ok, "");
}
#endif

//===----------------------------------------------------------------------===//
// Kernel image selection
//===----------------------------------------------------------------------===//

std::map<std::string, std::string> sections(std::vector<std::string> names) {
  std::map<std::string, std::string> s;
  for (const std::string &n : names)
    s[n] = "bytes";
  return s;
}

TEST(CudaKernelImage, PrefersExactCubin) {
  auto s = sections({"cubin.sm_80.k", "cubin.sm_90.k", "ptx.k", "constants"});
  EXPECT_EQ(selectKernelImage(s, "k", 9, 0).section, "cubin.sm_90.k");
  EXPECT_EQ(selectKernelImage(s, "k", 8, 0).section, "cubin.sm_80.k");
  EXPECT_FALSE(selectKernelImage(s, "k", 8, 0).isPtx);
  EXPECT_EQ(archName(8, 6), "sm_86");
}

TEST(CudaKernelImage, SameMajorLowerMinorCubinRuns) {
  auto s = sections({"cubin.sm_80.k", "cubin.sm_90a.k", "ptx.k"});
  EXPECT_EQ(selectKernelImage(s, "k", 8, 6).section, "cubin.sm_80.k");
  // sm_90a code runs only on sm_90a; a 9.1 device takes the PTX.
  KernelImage i = selectKernelImage(s, "k", 9, 1);
  EXPECT_EQ(i.section, "ptx.k");
  EXPECT_TRUE(i.isPtx);
}

TEST(CudaKernelImage, FallsBackToPtx) {
  auto s = sections({"cubin.sm_80.k", "cubin.sm_90.k", "ptx.k"});
  EXPECT_EQ(selectKernelImage(s, "k", 12, 0).section, "ptx.k");
  EXPECT_EQ(selectKernelImage(s, "k", 7, 5).section, "ptx.k");
}

TEST(CudaKernelImage, NamesArchsWhenNothingFits) {
  auto s = sections({"cubin.sm_80.k", "cubin.sm_90.k", "cubin.sm_90.other"});
  EXPECT_ERROR(selectKernelImage(s, "k", 7, 5),
               {"artifact has no kernels for sm_75 (has sm_80, sm_90); "
                "recompile with stepc --arch=sm_75"});
  // Another kernel's cubin for the arch does not count.
  EXPECT_ERROR(selectKernelImage(s, "missing", 9, 0),
               {"no kernels for sm_90", "'missing'"});
  EXPECT_ERROR(selectKernelImage({}, "k", 8, 0),
               {"has no cubins and no PTX"});
}

//===----------------------------------------------------------------------===//
// cuBLASLt layouts: C^T = op(rhs)^T op(lhs)^T in column order
//===----------------------------------------------------------------------===//

void expectMatrix(const MatrixLayout &l, int64_t rows, int64_t cols, int64_t ld,
                  int64_t batch, int64_t stride) {
  EXPECT_EQ(l.rows, rows);
  EXPECT_EQ(l.cols, cols);
  EXPECT_EQ(l.ld, ld);
  EXPECT_EQ(l.batch, batch);
  EXPECT_EQ(l.stride, stride);
}

TEST(CudaLayout, Plain) { // [M=2, K=3] x [K=3, N=4]
  MatmulLayout l = matmulLayout({2, 3}, {3, 4}, false, false);
  EXPECT_EQ(l.result, (Shape{2, 4}));
  EXPECT_FALSE(l.transA);
  EXPECT_FALSE(l.transB);
  expectMatrix(l.a, 4, 3, 4, 1, 0);   // rhs viewed as N x K
  expectMatrix(l.b, 3, 2, 3, 1, 6);   // lhs viewed as K x M
  expectMatrix(l.c, 4, 2, 4, 1, 8);   // C^T: N x M
}

TEST(CudaLayout, TransposeB) { // [2, 3] x [4, 3]^T
  MatmulLayout l = matmulLayout({2, 3}, {4, 3}, false, true);
  EXPECT_EQ(l.result, (Shape{2, 4}));
  EXPECT_TRUE(l.transA);
  EXPECT_FALSE(l.transB);
  expectMatrix(l.a, 3, 4, 3, 1, 0); // stored [N, K] viewed as K x N, op T
  expectMatrix(l.b, 3, 2, 3, 1, 6);
}

TEST(CudaLayout, TransposeA) { // [3, 2]^T x [3, 4]
  MatmulLayout l = matmulLayout({3, 2}, {3, 4}, true, false);
  EXPECT_EQ(l.result, (Shape{2, 4}));
  EXPECT_FALSE(l.transA);
  EXPECT_TRUE(l.transB);
  expectMatrix(l.b, 2, 3, 2, 1, 6); // stored [K, M] viewed as M x K, op T
  expectMatrix(l.c, 4, 2, 4, 1, 8);
}

TEST(CudaLayout, BatchedBothOperands) { // [5, 3, 2]^T x [5, 4, 3]^T
  MatmulLayout l = matmulLayout({5, 3, 2}, {5, 4, 3}, true, true);
  EXPECT_EQ(l.result, (Shape{5, 2, 4}));
  EXPECT_EQ(l.batch, 5);
  EXPECT_EQ(l.m, 2);
  EXPECT_TRUE(l.transA);
  EXPECT_TRUE(l.transB);
  expectMatrix(l.a, 3, 4, 3, 5, 12);
  expectMatrix(l.b, 2, 3, 2, 5, 6);
  expectMatrix(l.c, 4, 2, 4, 5, 8);
}

TEST(CudaLayout, SharedRhsFoldsIntoM) { // [2, 5, 3] x [3, 4]: one GEMM
  MatmulLayout l = matmulLayout({2, 5, 3}, {3, 4}, false, false);
  EXPECT_EQ(l.result, (Shape{2, 5, 4}));
  EXPECT_EQ(l.batch, 1);
  EXPECT_EQ(l.m, 10);
  expectMatrix(l.a, 4, 3, 4, 1, 0);
  expectMatrix(l.b, 3, 10, 3, 1, 30);
  expectMatrix(l.c, 4, 10, 4, 1, 40);
}

TEST(CudaLayout, SharedRhsWithTransposedLhsUsesStrideZero) {
  MatmulLayout l = matmulLayout({2, 3, 5}, {4, 3}, true, true);
  EXPECT_EQ(l.result, (Shape{2, 5, 4}));
  EXPECT_EQ(l.batch, 2);
  expectMatrix(l.a, 3, 4, 3, 2, 0); // the same rhs for every batch entry
  expectMatrix(l.b, 5, 3, 5, 2, 15);
  expectMatrix(l.c, 4, 5, 4, 2, 20);
}

TEST(CudaLayout, RejectsBadShapes) {
  EXPECT_ERROR(matmulLayout({3}, {3, 4}, false, false), {"rank >= 2"});
  EXPECT_ERROR(matmulLayout({2, 2, 3}, {1, 2, 3, 4}, false, false),
               {"rank 2 or the rank of lhs"});
  EXPECT_ERROR(matmulLayout({2, 2, 3}, {3, 3, 4}, false, false),
               {"batch) dims must be equal"});
  EXPECT_ERROR(matmulLayout({2, 3}, {4, 4}, false, false),
               {"lhs has K = 3, rhs has K = 4"});
}

TEST(CudaLayout, DeviceCodeCoversPlan) {
  Artifact a = test::sgdStep(); // hand-built: no kernels
  EXPECT_FALSE(hasDeviceCode(a.plan));
  for (PlanStep &s : a.plan.steps)
    s.kernel = "k";
  EXPECT_TRUE(hasDeviceCode(a.plan));
}

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
  p.artifact.sections["ptx.step_test_add"] = kAddPtx;
  p.artifact.meta["kernels"]["step_test_add"] = {
      {"grid", 1}, {"block", 32}, {"shared_bytes", 0},
      {"params", {"in0", "in1", "out0"}}};
  return p.artifact;
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

TEST_F(CudaDevice, MatchesCpuBackendWithoutGraph) {
  Artifact a = devicePlan();
  CudaExecutorOptions o;
  o.useGraph = false;
  CudaExecutor gpu(a, o);
  std::vector<HostTensor> args = deviceArgs(0.25);
  expectClose(gpu.run(args), cpu::execute(a, args));
}

TEST_F(CudaDevice, RefusesStepsWithoutDeviceCode) {
  EXPECT_ERROR(CudaExecutor e(test::sgdStep()),
               {"plan step 0 (step.add)", "no CUDA kernel"});
  Artifact a = devicePlan();
  a.sections.erase("ptx.step_test_add");
  EXPECT_ERROR(CudaExecutor e(a), {"artifact has no kernels for sm_"});
}

} // namespace
} // namespace step::rt::cuda
