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
// Carried arguments (setCarried: a param or state whose next value is a
// result) skip both copies: commitCarried copies the result into the
// argument's buffer on the device, where the next run reads it, so params
// and optimizer state stay on the device between steps; fetchArgument
// downloads one when the host needs it.
//
// Kernel ABI (docs/codegen.md): pointer parameters in0.., out0.. are the
// step's operands and results; grid, block and dynamic shared bytes come from
// the manifest's meta.kernels. One compute stream: a kernel never runs
// concurrently with itself.
//
// Offloading (step-offload): Host buffers live in one pinned host arena of
// plan.hostBytes. step.offload and step.reload are copies on two more
// streams (device to host, host to device), forked from and joined back into
// the compute stream through events where copySchedule says, so the copies
// overlap the compute steps around them and the whole run is still one graph.
//
// The pure parts (kernel image selection, cuBLASLt layouts, the copy
// schedule) are exposed for tests that run without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CUDA_CUDABACKEND_H
#define STEP_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Artifact.h"
#include "runtime/Comm.h"
#include "runtime/Profile.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
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
// step.offload / step.reload on the copy streams
//===----------------------------------------------------------------------===//

/// Where the copies of a plan's step.offload and step.reload steps meet the
/// compute stream. Step indices are into plan.steps.
struct CopySchedule {
  struct Offload {
    int64_t step = 0; ///< the step.offload
    /// The device-to-host copy is issued right after this step (-1: at the
    /// start of the run): after the last earlier step that has the operand
    /// among its results, or later when it overwrites host bytes that an
    /// earlier offload forked later or an earlier reload still reads (see
    /// `afterReloads`). The compute stream waits for the copy at `step`.
    int64_t issueAfter = -1;
    /// Earlier step.reload steps whose copies must finish before this copy
    /// starts: those reading host bytes this copy overwrites (a reused host
    /// arena slot), and those still writing the device bytes it reads (the
    /// operand is a reload's result the compute stream has not yet waited
    /// for). Ascending.
    std::vector<int64_t> afterReloads;
  };
  struct Reload {
    int64_t step = 0; ///< the step.reload; its copy is issued there
    /// The compute stream waits for the host-to-device copy before this
    /// step: the first later step with an operand or result whose device
    /// arena bytes overlap the destination's (a view of it included).
    /// plan.steps.size() when none does: joined at the end of the run.
    int64_t waitBefore = 0;
  };
  std::vector<Offload> offloads; ///< in step order
  std::vector<Reload> reloads;   ///< in step order
};

/// Computes the copy schedule of `plan`. Pure: no GPU. Throws rt::Error
/// naming the step when a copy is malformed: a step.offload that does not
/// copy one device buffer into one Host buffer of the same size, a
/// step.reload that does not copy one Host buffer into one Transient buffer
/// of the same size, a reload whose Host operand no earlier step.offload
/// wrote, or whose host bytes a later step.offload overwrote before it, or a
/// buffer id out of range. Cost: O(steps x buffers per step) per copy,
/// plus O(copies^2) for the host slot checks.
CopySchedule copySchedule(const Plan &plan);

//===----------------------------------------------------------------------===//
// NCCL failures
//===----------------------------------------------------------------------===//

/// The message of an NCCL call `what` that returned `result` (an
/// ncclResult_t): "NCCL error in <what>: <ncclGetErrorString> (ncclResult_t
/// N)", plus, for ncclRemoteError, that another rank exited and the whole
/// run stops. Loads NCCL (dlopen) for its text; throws rt::Error when NCCL
/// cannot be loaded or this build has no nccl.h.
std::string ncclErrorMessage(int result, const std::string &what);

//===----------------------------------------------------------------------===//
// CudaExecutor
//===----------------------------------------------------------------------===//

/// Whether every step of `plan` has a CUDA implementation here: a generated
/// kernel, or a matmul, `matmul` fusion (one cuBLASLt call with an
/// epilogue, MatmulEpilogue.h), reshape, stop_gradient, offload or reload
/// the backend runs itself. False for an artifact compiled without kernels
/// (stepc --no-kernels).
bool hasDeviceCode(const Plan &plan);

struct CudaExecutorOptions {
  /// Capture the step into a CUDA graph on the first run and replay it; off,
  /// every run launches the steps one by one (for debugging).
  bool useGraph = true;
  /// cuBLASLt workspace (a fixed buffer, so matmuls can be captured).
  int64_t matmulWorkspaceBytes = 32 << 20;
  /// Before the first run, time up to kMatmulTuneCandidates of cuBLASLt's
  /// heuristic algorithms for each matmul shape on the step's buffers and
  /// keep the fastest (CudaMatmul.cpp), as torch.compile's max-autotune
  /// does; false: the heuristic's first. The choice depends on timings, so
  /// the bits of a tuned run may differ between processes (split-K sums in
  /// another order) unless tuneCache keeps the choice; a run's choice
  /// stays for the executor's life.
  bool tuneMatmuls = false;
  /// With tuneMatmuls: the file of picks kept across processes
  /// (MatmulTuneCache.h): a shape found there for this device and cuBLASLt
  /// is not timed again, and the new picks are added. Empty: none.
  std::string tuneCache;
  /// Device ordinal.
  int device = 0;
  /// This rank's communicator for a sharded plan's collectives (NCCL is
  /// bootstrapped over it); null: one rank.
  Communicator *comm = nullptr;
  /// Runs the collectives on a stream of their own, forked from the
  /// compute stream at each one's position and joined where
  /// rt::collectiveSchedule says; false: on the compute stream, in order.
  bool overlapCollectives = true;
};

/// What an executor holds on its device (CudaExecutor::memory).
struct DeviceMemory {
  int64_t arenaBytes = 0;     ///< the plan's arena (step-memory-plan's peak)
  int64_t allocatedBytes = 0; ///< every cuMemAlloc of the executor: the
                              ///< arena, params, state, inputs, constants,
                              ///< the cuBLASLt workspace
  /// How much less cuMemGetInfo says is free than before the executor's
  /// first allocation: the allocations plus what the driver took for the
  /// modules, the graph and the libraries; -1 when the driver did not say.
  int64_t measuredBytes = -1;
  int64_t totalBytes = -1; ///< the device's memory
};

class CudaExecutor {
public:
  /// Loads the kernels of `artifact` for the device, allocates device memory
  /// (and the pinned host arena) and uploads the constants. Throws rt::Error
  /// when the driver, a device, cuBLASLt (if the plan has a matmul) or a
  /// kernel image is missing, or the plan uses a step this backend cannot
  /// run or a malformed copy (copySchedule).
  explicit CudaExecutor(const Artifact &artifact,
                        CudaExecutorOptions options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor &) = delete;
  CudaExecutor &operator=(const CudaExecutor &) = delete;

  /// Runs the plan: `args` are the values of plan.arguments, in order;
  /// returns the values of plan.results, in order (as cpu::execute),
  /// except the carried ones (setCarried). A carried argument whose device
  /// copy is current is not read (only its dtype and shape are checked).
  std::vector<HostTensor> run(const std::vector<HostTensor> &args);
  /// With a `timeline` the run is not the graph's replay but its ops
  /// recorded one by one with a timing event after each: every compute-
  /// stream step gets its device time (runtime/Profile.h); collectives on
  /// their own stream and offload copies are not in it.
  std::vector<HostTensor> run(const std::vector<const HostTensor *> &args,
                              RunTimeline *timeline = nullptr);

  /// Carries argument `arg` from result `result` for each pair: the result
  /// is the argument's next value (a param or state and its update). Kept
  /// are the pairs whose two buffers are in device memory (not
  /// inHostMemory) of the same dtype and shape, and whose result is no
  /// other argument's buffer; the rest are dropped. A carried result is not
  /// downloaded: run() returns a default HostTensor (no bytes) in its
  /// place. A carried argument is still uploaded by run() until
  /// commitCarried makes its device copy current. Replaces any earlier
  /// pairs and invalidates (invalidateCarried).
  void setCarried(const std::vector<std::pair<size_t, size_t>> &pairs);
  /// The pairs setCarried kept, in the order given.
  const std::vector<std::pair<size_t, size_t>> &carried() const;
  /// Whether a run writes a carried argument's buffer itself (a result
  /// donated to it, compiler/pipeline/Donation.cpp): then a run that fails
  /// may leave some arguments updated, and only commitCarried makes the
  /// buffers whole again.
  bool updatesInPlace() const;

  /// The device memory this executor holds now (see DeviceMemory).
  DeviceMemory memory() const;
  /// tuneMatmuls: the matmul shapes whose candidates were timed, and those
  /// whose pick came from the tuning cache (CudaExecutorOptions::tuneCache).
  std::pair<int, int> matmulTuning() const;
  /// Accepts the last run: enqueues on the compute stream a device-to-
  /// device copy of each carried result into its argument's buffer (none
  /// where the memory plan made them one buffer), after which runs upload
  /// no carried argument. Returns without waiting: later runs and
  /// fetchArgument are ordered after it on the same stream. Not calling it
  /// rejects the run: the argument buffers keep the values it read.
  void commitCarried();
  /// The device copy of argument `arg` (the value the last run read, or
  /// after commitCarried its update), copied into `out` (made the
  /// argument's dtype and shape) once the stream has done everything
  /// before; synchronous.
  void fetchArgument(size_t arg, HostTensor &out);
  /// The device copies are stale: the next run uploads every argument.
  void invalidateCarried();
  /// Takes the carried arguments' current values from `from`'s device
  /// buffers (another executor on the same device, e.g. another bucket's
  /// plan of the same step, whose commitCarried ran): for each pair
  /// (argument of this plan, argument of `from`'s) a device-to-device copy
  /// on this stream, after `from`'s stream has finished. `pairs` must name
  /// every carried argument of this executor, each carried and of the same
  /// dtype and shape there; then no run uploads them (as after
  /// commitCarried). Throws rt::Error, the device copies stale, otherwise.
  void adoptCarried(const CudaExecutor &from,
                    const std::vector<std::pair<size_t, size_t>> &pairs);

  /// "sm_90", the device's architecture.
  const std::string &arch() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_CUDABACKEND_H
