//===- CudaBackendTest.cpp - The CUDA backend (runtime/cuda) --------------===//
//
// Two groups. CudaSymbols/CudaLayout/CudaKernelImage/CudaCopySchedule run
// everywhere: library loading and its failure reasons (against the toolkit's
// driver stub, which exports every symbol but has no driver behind it),
// kernel image selection, the cuBLASLt layouts and where offload/reload
// copies fork and join, all without a GPU. The tests that run plans on a
// device (CudaDevice, label `gpu`) are in CudaDeviceTest.cpp.
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
  // Copies need no generated kernel.
  a.plan.steps.back().op = "step.offload";
  a.plan.steps.front().op = "step.reload";
  a.plan.steps.back().kernel = a.plan.steps.front().kernel = "";
  EXPECT_TRUE(hasDeviceCode(a.plan));
}

//===----------------------------------------------------------------------===//
// step.offload / step.reload: where copies fork from and join compute
//===----------------------------------------------------------------------===//

TEST(CudaCopySchedule, OffloadForksAfterItsProducer) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t a = p.transient(F32, {4}, 0);
  int64_t b = p.transient(F32, {4}, 16), c = p.transient(F32, {4}, 32);
  int64_t d = p.transient(F32, {4}, 48);
  // step.test_pair stands for any op with two results; the schedule reads
  // only buffer ids and offsets.
  p.step("step.add", {}, {x, x}, {a});                     // 0
  p.step("step.test_pair", {}, {x}, {b, c});               // 1: c is 2nd
  p.step("step.add", {}, {a, c}, {d});                     // 2
  p.step("step.offload", {}, {a}, {p.host(F32, {4}, 0)});  // 3
  p.step("step.offload", {}, {c}, {p.host(F32, {4}, 16)}); // 4
  p.step("step.offload", {}, {x}, {p.host(F32, {4}, 32)}); // 5: argument
  p.step("step.offload", {}, {d}, {p.host(F32, {4}, 48)}); // 6
  p.result(d, "d");
  ASSERT_NO_THROW(p.plan.validate());
  CopySchedule s = copySchedule(p.plan);
  EXPECT_TRUE(s.reloads.empty());
  ASSERT_EQ(s.offloads.size(), 4u);
  std::vector<int64_t> steps, after;
  for (const CopySchedule::Offload &o : s.offloads) {
    steps.push_back(o.step);
    after.push_back(o.issueAfter);
    EXPECT_TRUE(o.afterReloads.empty()) << "offload at step " << o.step;
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4, 5, 6}));
  EXPECT_EQ(after, (std::vector<int64_t>{0, 1, -1, 2}));
}

TEST(CudaCopySchedule, ReloadJoinsBeforeAViewOfItsBytes) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t a = p.transient(F32, {4}, 0);
  int64_t ha = p.host(F32, {4}, 0);
  int64_t b = p.transient(F32, {4}, 16);
  int64_t r = p.transient(F32, {4}, 0); // a's bytes, free after the offload
  int64_t c = p.transient(F32, {4}, 32);
  int64_t v = p.transient(F32, {2, 2}, 0); // a view of r
  int64_t e = p.transient(F32, {2, 2}, 48);
  p.step("step.add", {}, {x, x}, {a});       // 0
  p.step("step.offload", {}, {a}, {ha});     // 1
  p.step("step.add", {}, {x, x}, {b});       // 2: other bytes
  p.step("step.reload", {}, {ha}, {r});      // 3
  p.step("step.add", {}, {b, x}, {c});       // 4: other bytes
  p.step("step.reshape", {}, {r}, {v});      // 5: the first toucher
  p.step("step.add", {}, {v, v}, {e});       // 6
  p.result(e, "e");
  p.result(c, "c");
  ASSERT_NO_THROW(p.plan.validate());
  ASSERT_TRUE(isView(p.plan, p.plan.steps[5]));
  CopySchedule s = copySchedule(p.plan);
  ASSERT_EQ(s.offloads.size(), 1u);
  EXPECT_EQ(s.offloads[0].issueAfter, 0);
  ASSERT_EQ(s.reloads.size(), 1u);
  EXPECT_EQ(s.reloads[0].step, 3);
  EXPECT_EQ(s.reloads[0].waitBefore, 5);
}

TEST(CudaCopySchedule, ReloadJoinsBeforeAWriterOfOverlappingBytes) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t a = p.transient(F32, {4}, 64);
  int64_t ha = p.host(F32, {4}, 0);
  int64_t r = p.transient(F32, {4}, 16);  // bytes [16, 32)
  int64_t below = p.transient(F32, {4}, 0), above = p.transient(F32, {4}, 32);
  int64_t tail = p.transient(F32, {2}, 24); // bytes [24, 32): overlaps r
  p.step("step.add", {}, {x, x}, {a});             // 0
  p.step("step.offload", {}, {a}, {ha});           // 1
  p.step("step.reload", {}, {ha}, {r});            // 2
  p.step("step.add", {}, {x, x}, {below});         // 3: ends where r starts
  p.step("step.add", {}, {x, x}, {above});         // 4: starts where r ends
  p.step("step.test_slice", {}, {above}, {tail});  // 5: r is dead; reuses it
  p.result(tail, "tail");
  p.result(below, "below");
  ASSERT_NO_THROW(p.plan.validate());
  CopySchedule s = copySchedule(p.plan);
  ASSERT_EQ(s.reloads.size(), 1u);
  EXPECT_EQ(s.reloads[0].waitBefore, 5);
}

TEST(CudaCopySchedule, ReloadWithNoLaterToucherJoinsAtTheEnd) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t hx = p.host(F32, {4}, 0);
  int64_t r = p.transient(F32, {4}, 0), y = p.transient(F32, {4}, 16);
  p.step("step.offload", {}, {x}, {hx});   // 0
  p.step("step.reload", {}, {hx}, {r});    // 1
  p.step("step.add", {}, {x, x}, {y});     // 2: other bytes
  p.result(r, "r"); // downloaded after the run: the end join covers it
  p.result(y, "y");
  ASSERT_NO_THROW(p.plan.validate());
  CopySchedule s = copySchedule(p.plan);
  ASSERT_EQ(s.offloads.size(), 1u);
  EXPECT_EQ(s.offloads[0].issueAfter, -1);
  ASSERT_EQ(s.reloads.size(), 1u);
  EXPECT_EQ(s.reloads[0].waitBefore, 3); // plan.steps.size()
}

TEST(CudaCopySchedule, ReusedHostSlotWaitsForTheReloadReadingIt) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t a = p.transient(F32, {4}, 0), b = p.transient(F32, {4}, 16);
  int64_t ha = p.host(F32, {4}, 0);
  int64_t ra = p.transient(F32, {4}, 0);
  int64_t c = p.transient(F32, {4}, 32);
  int64_t hb = p.host(F32, {4}, 0); // ha's slot: ha is dead after step 3
  int64_t rb = p.transient(F32, {4}, 16);
  int64_t hr = p.host(F32, {4}, 16);
  p.step("step.add", {}, {x, x}, {a});      // 0
  p.step("step.add", {}, {x, x}, {b});      // 1: b's producer
  p.step("step.offload", {}, {a}, {ha});    // 2
  p.step("step.reload", {}, {ha}, {ra});    // 3: reads the slot
  p.step("step.add", {}, {ra, x}, {c});     // 4
  p.step("step.offload", {}, {b}, {hb});    // 5: overwrites the slot
  p.step("step.reload", {}, {hb}, {rb});    // 6
  p.step("step.offload", {}, {rb}, {hr});   // 7: reads the reload's result
  p.result(c, "c");
  ASSERT_NO_THROW(p.plan.validate());
  CopySchedule s = copySchedule(p.plan);
  ASSERT_EQ(s.offloads.size(), 3u);
  EXPECT_EQ(s.offloads[0].issueAfter, 0);
  // Not after step 1: the slot is read by the reload of step 3 until then.
  EXPECT_EQ(s.offloads[1].issueAfter, 3);
  EXPECT_EQ(s.offloads[1].afterReloads, (std::vector<int64_t>{3}));
  // Forks right after the reload it copies back out, so it waits for it.
  EXPECT_EQ(s.offloads[2].issueAfter, 6);
  EXPECT_EQ(s.offloads[2].afterReloads, (std::vector<int64_t>{6}));
  ASSERT_EQ(s.reloads.size(), 2u);
  EXPECT_EQ(s.reloads[0].waitBefore, 4);
  EXPECT_EQ(s.reloads[1].waitBefore, 7);
}

// copySchedule runs Plan::validate: malformed copies get its messages.
TEST(CudaCopySchedule, RejectsMalformedCopies) {
  constexpr auto F32 = DType::F32;
  // Filled in place: a PlanBuilder holds a reference into itself, so it is
  // never returned by value.
  auto base = [](PlanBuilder &p) {
    p.argument("x", BufferKind::Input, F32, {4}); // 0
    p.transient(F32, {4}, 0);                     // 1
    p.host(F32, {4}, 0);                          // 2
    p.host(F32, {2}, 16);                         // 3
    p.transient(F32, {4}, 16);                    // 4
  };
  {
    PlanBuilder p;
    base(p); // nothing ever wrote buffer 2
    p.step("step.reload", {}, {2}, {1});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 0 (step.reload) reads buffer '%2' before it is "
                  "written"});
  }
  {
    PlanBuilder p;
    base(p); // written, but only after the reload
    p.step("step.reload", {}, {2}, {1});
    p.step("step.offload", {}, {0}, {2});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 0 (step.reload)", "before it is written"});
  }
  {
    PlanBuilder p;
    base(p);
    p.step("step.offload", {}, {0}, {1});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 0 (step.offload) must copy one device buffer "
                  "into a host buffer of the same size"});
  }
  {
    PlanBuilder p;
    base(p);
    p.step("step.offload", {}, {0}, {2});
    p.step("step.reload", {}, {2}, {0}); // into an input, not the arena
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 1 (step.reload) must copy one buffer in host "
                  "memory into a transient buffer of the same size"});
  }
  {
    PlanBuilder p;
    base(p);
    p.step("step.offload", {}, {0, 0}, {2});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 0 (step.offload) must copy one device buffer"});
  }
  {
    PlanBuilder p;
    base(p);
    p.step("step.offload", {}, {0}, {3});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 0 (step.offload) must copy one device buffer "
                  "into a host buffer of the same size"});
  }
  {
    PlanBuilder p;
    base(p);
    p.step("step.add", {}, {0, 99}, {1});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan: step 0 (step.add) names buffer 99, but the plan has"});
  }
  {
    PlanBuilder p;
    base(p); // buffer 5 reuses buffer 2's host bytes early
    p.host(F32, {4}, 0);
    p.step("step.offload", {}, {0}, {2});
    p.step("step.offload", {}, {0}, {5});
    p.step("step.reload", {}, {2}, {1});
    EXPECT_ERROR(copySchedule(p.plan),
                 {"plan step 2 (step.reload): reads host buffer 2",
                  "written by plan step 0 (step.offload), but plan step 1 "
                  "(step.offload) overwrites its host bytes in between"});
  }
}

// A host step may not write host bytes between the writer of a reload's
// host operand and that reload.
TEST(CudaCopySchedule, RejectsAHostStepOverwritingAReloadsBytes) {
  constexpr auto F32 = DType::F32;
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {4});
  p.plan.buffers[w].host = true;
  int64_t a = p.host(F32, {4}, 0), b = p.host(F32, {4}, 0);
  int64_t r = p.transient(F32, {4}, 0);
  p.step("step.neg", {}, {w}, {a});
  p.plan.steps.back().host = true;
  p.step("step.abs", {}, {w}, {b}); // a's bytes, before a's reload
  p.plan.steps.back().host = true;
  p.step("step.reload", {}, {a}, {r});
  p.result(r, "r");
  ASSERT_NO_THROW(p.plan.validate());
  EXPECT_ERROR(copySchedule(p.plan),
               {"plan step 2 (step.reload): reads host buffer 1",
                "written by plan step 0 (step.neg), but plan step 1 "
                "(step.abs) overwrites its host bytes in between"});
}

} // namespace
} // namespace step::rt::cuda
