//===- CudaBackend.h - Runs an execution plan on a CUDA GPU -----*- C++ -*-===//
//
// The CUDA backend: the artifact's generated kernels launched through the
// driver API, step.matmul and `matmul` fusions (a bias and/or ReLU/GELU
// epilogue) through cuBLASLt, everything captured into one CUDA
// graph on the first run and replayed afterwards. Both libraries are loaded
// with dlopen (DynamicSymbols.h); nothing here links them.
//
// Memory: one device arena of plan.arenaBytes for every transient buffer (at
// the memory plan's offsets), plus one device buffer per param, state, input
// and constant. Constants are uploaded once; every argument is uploaded into
// its fixed buffer before each launch, so the graph's pointers never change.
// Results are copied back to host tensors after the stream synchronizes.
//
// Kernel ABI (docs/codegen.md): pointer parameters in0.., out0.. are the
// step's operands and results; grid, block and dynamic shared bytes come from
// the manifest's meta.kernels. One stream: a kernel never runs concurrently
// with itself.
//
// The pure parts (kernel image selection, cuBLASLt layouts) are exposed for
// tests that run without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CUDA_CUDABACKEND_H
#define STEP_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Artifact.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace step::rt::cuda {

//===----------------------------------------------------------------------===//
// Kernel image selection
//===----------------------------------------------------------------------===//

struct KernelImage {
  std::string section; ///< "cubin.sm_86.<kernel>" or "ptx.<kernel>"
  bool isPtx = false;
};

/// "sm_86" for compute capability 8.6.
std::string archName(int major, int minor);

/// Picks the image of `kernel` for a device of compute capability
/// major.minor: the cubin for exactly that arch; else the cubin for the
/// highest arch of the same major version with a lower minor (SASS runs on
/// later minors of its major); else "ptx.<kernel>", which the driver JITs.
/// Throws rt::Error naming the archs the artifact has when none fits:
/// "artifact has no kernels for sm_86 (has sm_80, sm_90); recompile with
/// stepc --arch=sm_86".
KernelImage selectKernelImage(const std::map<std::string, std::string> &sections,
                              const std::string &kernel, int major, int minor);

//===----------------------------------------------------------------------===//
// cuBLASLt layouts for step.matmul
//===----------------------------------------------------------------------===//

/// One operand as cuBLASLt sees it: a column-major rows x cols matrix with
/// leading dimension ld, `batch` of them `stride` elements apart.
struct MatrixLayout {
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch = 1, stride = 0;
};

/// A row-major step.matmul C[.., M, N] = op(A)[.., M, K] * op(B)[.., K, N]
/// computed as the column-major product C^T = op(B)^T * op(A)^T: cuBLASLt's
/// first operand is our rhs, its second our lhs, and C^T in column order is C
/// in row order, so no data moves.
struct MatmulLayout {
  /// The row-major GEMM run: `batch` products of [m, k] x [k, n] (after a
  /// shared rhs folded the batch into m).
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  bool transA = false, transB = false; ///< cuBLASLt ops on `a` and `b`
  MatrixLayout a, b, c;                ///< cuBLASLt's a (= rhs), b (= lhs), c
  Shape result;                        ///< row-major shape of the result
};

/// Computes the layout, checking the operand shapes as the CPU kernel does
/// (lhs rank >= 2; rhs rank 2, shared by every batch entry with stride 0, or
/// the lhs rank with equal batch dims; equal K). With a rank-2 rhs and no
/// transpose_a the batch folds into M (one GEMM). Throws rt::Error.
MatmulLayout matmulLayout(const Shape &lhs, const Shape &rhs, bool transposeA,
                          bool transposeB);

//===----------------------------------------------------------------------===//
// CudaExecutor
//===----------------------------------------------------------------------===//

/// Whether every step of `plan` has a CUDA implementation here: a generated
/// kernel, or a matmul, `matmul` fusion (one cuBLASLt call with an
/// epilogue, MatmulEpilogue.h), reshape or stop_gradient the backend runs
/// itself. False
/// for an artifact compiled without kernels (stepc --no-kernels).
bool hasDeviceCode(const Plan &plan);

struct CudaExecutorOptions {
  /// Capture the step into a CUDA graph on the first run and replay it; off,
  /// every run launches the steps one by one (for debugging).
  bool useGraph = true;
  /// cuBLASLt workspace (a fixed buffer, so matmuls can be captured).
  int64_t matmulWorkspaceBytes = 32 << 20;
  /// Device ordinal.
  int device = 0;
};

class CudaExecutor {
public:
  /// Loads the kernels of `artifact` for the device, allocates device memory
  /// and uploads the constants. Throws rt::Error when the driver, a device,
  /// cuBLASLt (if the plan has a matmul) or a kernel image is missing, or the
  /// plan uses a step this backend cannot run.
  explicit CudaExecutor(const Artifact &artifact,
                        CudaExecutorOptions options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor &) = delete;
  CudaExecutor &operator=(const CudaExecutor &) = delete;

  /// Runs the plan: `args` are the values of plan.arguments, in order;
  /// returns the values of plan.results, in order (as cpu::execute).
  std::vector<HostTensor> run(const std::vector<HostTensor> &args);
  std::vector<HostTensor> run(const std::vector<const HostTensor *> &args);

  /// "sm_90", the device's architecture.
  const std::string &arch() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_CUDABACKEND_H
