//===- CudaErrorsTest.cpp - GPU failures as the user reads them -----------===//
//
// The rows of docs/errors.md that need a GPU to happen (device out of
// memory, a cuBLASLt or NCCL call failing) checked without one: each test
// hands the failure code the library would return to the function of
// runtime/cuda that turns it into the message, using the real cuBLASLt and
// NCCL libraries for their status texts where they are installed.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DynamicSymbols.h"

#include "TestUtil.h"

#ifdef STEP_TEST_HAVE_NCCL
#include <nccl.h>
#endif

#include <gtest/gtest.h>

namespace step::rt::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Device out of memory (cuMemAlloc)
//===----------------------------------------------------------------------===//

TEST(CudaErrors, OutOfMemoryNamesTheBytesAndHowToNeedLess) {
  // A 6 GiB arena on a 16 GiB device with 4 GiB free.
  std::string m = allocationError(
      CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY (out of memory)",
      "cuMemAlloc of the arena", 6442450944, 4294967296, 17179869184);
  for (const char *part :
       {"out of device memory: cuMemAlloc of the arena needs 6442450944 bytes",
        "the device has 4294967296 of 17179869184 bytes free",
        "--remat-budget=BYTES", "--offload=auto", "a smaller batch"})
    EXPECT_NE(m.find(part), std::string::npos)
        << "message \"" << m << "\" lacks \"" << part << "\"";
}

TEST(CudaErrors, OutOfMemoryWithUnknownFreeBytes) {
  std::string m = allocationError(
      CUDA_ERROR_OUT_OF_MEMORY, "out of memory",
      "cuMemHostAlloc of the pinned host arena", 1024, -1, 0);
  EXPECT_NE(m.find("cuMemHostAlloc of the pinned host arena needs 1024 bytes "
                   "and the device's free memory is unknown"),
            std::string::npos)
      << m;
}

TEST(CudaErrors, OtherAllocationFailuresKeepTheDriverText) {
  // Not memory: no advice about remat, the driver's own words.
  std::string m = allocationError(
      CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT (invalid context)",
      "cuMemAlloc of buffer 3 ('w', param)", 48, 1 << 20, 1 << 30);
  EXPECT_EQ(m, "CUDA error in cuMemAlloc of buffer 3 ('w', param): "
               "CUDA_ERROR_INVALID_CONTEXT (invalid context)");
}

//===----------------------------------------------------------------------===//
// cuBLASLt status
//===----------------------------------------------------------------------===//

#ifdef STEP_CUDA_CUBLASLT
TEST(CudaErrors, CublasLtFailureNamesTheStepAndStatus) {
  std::string reason;
  auto lt = CublasLtSymbols::load({STEP_CUDA_CUBLASLT}, &reason);
  ASSERT_NE(lt, nullptr) << reason;
  // What cublasLtMatmul returns for a layout it has no kernel for.
  EXPECT_ERROR(check(*lt, CUBLAS_STATUS_NOT_SUPPORTED,
                     "plan step 4 (step.matmul): cublasLtMatmul"),
               {"cuBLASLt error in plan step 4 (step.matmul): cublasLtMatmul: ",
                "(15)"});
  // The status text is cuBLASLt's own, not a number only.
  try {
    check(*lt, CUBLAS_STATUS_NOT_SUPPORTED, "x");
  } catch (const Error &e) {
    std::string m = e.what();
    EXPECT_EQ(m.find("unknown status"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(check(*lt, CUBLAS_STATUS_SUCCESS, "x"));
}
#endif

//===----------------------------------------------------------------------===//
// NCCL results (a rank dying mid-collective)
//===----------------------------------------------------------------------===//

#ifdef STEP_TEST_HAVE_NCCL
TEST(CudaErrors, NcclRemoteErrorSaysARankExited) {
  std::string m;
  try {
    m = ncclErrorMessage(ncclRemoteError, "ncclAllReduce (plan step 3)");
  } catch (const Error &e) {
    GTEST_SKIP() << "NCCL cannot be loaded here: " << e.what();
  }
  EXPECT_NE(m.find("NCCL error in ncclAllReduce (plan step 3): remote process "
                   "exited"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("another rank exited"), std::string::npos) << m;
  EXPECT_NE(m.find("(ncclResult_t 6)"), std::string::npos) << m;

  // A local failure: NCCL's text and no claim about other ranks.
  m = ncclErrorMessage(ncclSystemError, "ncclCommInitRank");
  EXPECT_NE(m.find("NCCL error in ncclCommInitRank: unhandled system error"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("another rank"), std::string::npos) << m;
}
#endif

} // namespace
} // namespace step::rt::cuda
