//===- CudaExecutorImpl.h - The CUDA executor's state -------*- C++ -*-===//
//
// Internal to runtime/cuda: the prepared Op list and the state of a
// CudaExecutor, shared by CudaBackend.cpp (allocation, the Op list, copies,
// runs) and CudaMatmul.cpp (cuBLASLt descriptors and heuristics).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CUDA_CUDAEXECUTORIMPL_H
#define STEP_RUNTIME_CUDA_CUDAEXECUTORIMPL_H

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DynamicSymbols.h"
#include "runtime/cuda/MatmulEpilogue.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace step::rt::cuda {
namespace detail {

/// A host step (PlanStep::host, step-offload-optimizer): the CPU kernel
/// runs on host memory from a host function the compute stream calls in
/// order (cuLaunchHostFunc, a host node of the captured graph). A host
/// function may not call CUDA, nor throw: a failure is kept in `error`
/// and thrown by the run after its synchronization.
struct HostStep {
  const Plan *plan = nullptr;
  size_t step = 0;
  std::string where;
  std::vector<const void *> in; ///< operand bytes (host memory, constants)
  std::vector<void *> out;      ///< result bytes (the host arena)
  std::vector<std::string> constants; ///< copies of constant operands
  std::string error;            ///< "" unless the last call failed
};

/// One prepared launch, or a copy-stream fork or join.
struct Op {
  enum Kind {
    Kernel,
    Matmul,
    Copy,
    Zero,
    CopyOut, ///< step.offload: device `src` to `host` on the d2h stream
    CopyIn,  ///< step.reload: `host` to device `dst` on the h2d stream
    Wait,    ///< the compute stream waits for `done`
    Join,    ///< `done` recorded on `copyStream`, waited for by compute
    Collective, ///< an NCCL call on the compute stream, or forked onto
                ///< the collective stream when `done` is set
    HostFn,     ///< a host step on the compute stream (`hostStep`)
  } kind = Kernel;
  std::string where; ///< "plan step 3 (step.add)"
  int64_t step = -1; ///< the plan step it runs (-1: a fork, join or wait)
  // Kernel.
  CUfunction fn = nullptr;
  unsigned grid = 0, block = 0, shared = 0;
  std::vector<CUdeviceptr> ptrs; ///< argument values; params point here
  std::vector<void *> params;
  /// More entry points of the kernel's module launched right after it
  /// with the same params (meta.kernels' `then`).
  struct Launch {
    CUfunction fn = nullptr;
    unsigned grid = 0, block = 0, shared = 0;
  };
  std::vector<Launch> then;
  // Matmul: index into Impl::matmuls.
  size_t matmul = 0;
  // Copy / Zero / CopyOut / CopyIn.
  CUdeviceptr dst = 0, src = 0;
  size_t bytes = 0;
  // CopyOut / CopyIn / Wait / Join.
  void *host = nullptr;            ///< in the pinned host arena
  CUevent ready = nullptr;         ///< the fork, on the compute stream
  CUevent done = nullptr;          ///< the copy finished, on its stream
  std::vector<CUevent> after;      ///< reload copies to finish first
  CUstream copyStream = nullptr;   ///< Join only
  // Collective (CudaCollectives.cpp): `src` to `dst`, `count` elements as
  // NCCL counts them; the NCCL enums as ints (no nccl.h here).
  enum Which { AllReduce, ReduceScatter, AllGather } collective = AllReduce;
  int ncclType = 0, ncclOp = 0;
  size_t count = 0;
  void *ncclComm = nullptr; ///< of the step's replica group
  // HostFn.
  std::shared_ptr<HostStep> hostStep;
};

/// One cuBLASLt call: a plain step.matmul (epilogue None, no bias) or a
/// `matmul` fusion read by readMatmulFusion. Buffer ids of the outer plan.
struct MatmulCall {
  int64_t lhs = -1, rhs = -1, result = -1, bias = -1;
  /// GELU's input: stored by GELU_AUX*, read by DGELU* (-1: none); the
  /// bias gradient DGELU_BGRAD or BGRADA/BGRADB writes (-1: none). Plan
  /// buffer ids.
  int64_t aux = -1, biasGrad = -1;
  const nlohmann::json *attrs = nullptr; ///< the step.matmul's attributes
  MatmulEpilogue epilogue = MatmulEpilogue::None;
};

struct MatmulOp {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  CUdeviceptr pa = 0, pb = 0, pc = 0;
  std::string key; ///< the shape key of algoCache
};

/// Most heuristic algorithms timed per matmul shape (tuneMatmuls).
constexpr int kMatmulTuneCandidates = 8;

} // namespace detail

using namespace detail;

struct CudaExecutor::Impl {
  /// Valid during construction only: the executor keeps no reference to it.
  const Artifact *artifact;
  const Plan plan;
  CudaExecutorOptions options;
  const DriverSymbols *d = nullptr;
  const CublasLtSymbols *lt = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  /// Copy streams for step.offload (device to host) and step.reload (host
  /// to device); created only for a plan that has such steps.
  CUstream d2h = nullptr, h2d = nullptr;
  /// The collectives' stream (options.overlapCollectives and a plan with
  /// collectives), forked and joined as rt::collectiveSchedule says.
  CUstream commStream = nullptr;
  std::vector<CUevent> events; ///< every event the Ops name, owned here
  std::string arch;
  int ccMajor = 0, ccMinor = 0; ///< compute capability
  /// Shared memory a block may have once a function opts in (static and
  /// dynamic together).
  int sharedOptin = 0;
  std::vector<CUdeviceptr> allocations;
  int64_t allocatedBytes = 0; ///< the sum of `allocations`' sizes
  /// cuMemGetInfo's free bytes once the context was current, before any
  /// allocation of this executor; -1 when the driver did not say.
  int64_t freeAtStart = -1;
  std::vector<CUdeviceptr> ptrOf; ///< device address of every buffer
  uint8_t *hostArena = nullptr;    ///< pinned, plan.hostBytes; null if 0
  /// Host buffers and params/state held in host memory: their address.
  std::vector<void *> hostOf;
  std::vector<void *> hostAllocations; ///< pinned params/state, freed here
  std::vector<std::shared_ptr<HostStep>> hostSteps;
  CUdeviceptr workspace = 0;
  std::map<std::string, CUmodule> modules;
  std::map<std::string, CUfunction> functions;
  cublasLtHandle_t ltHandle = nullptr;
  std::map<std::string, cublasLtMatmulAlgo_t> algoCache; ///< by shape key
  /// tuneMatmuls: the heuristic's algorithms by shape key, until tuned.
  std::map<std::string, std::vector<cublasLtMatmulAlgo_t>> tuneCandidates;
  std::vector<MatmulOp> matmuls;
  std::vector<Op> ops;
  CUgraph graph = nullptr;
  CUgraphExec graphExec = nullptr;
  /// NCCL communicators (ncclComm_t) by replica groups ("2:0,1,2,3,"):
  /// this rank's group of each, made by its first collective.
  std::map<std::string, void *> ncclComms;
  /// Carried arguments (CudaExecutor::setCarried): (argument, result)
  /// index pairs, and by index whether an argument or result is carried.
  std::vector<std::pair<size_t, size_t>> carried;
  std::vector<bool> carriedArgument, carriedResult;
  /// Whether a carried result is its argument's own buffer (a donated
  /// update, written in place by the run): CudaExecutor::updatesInPlace.
  bool carriedInPlace = false;
  /// Whether the carried arguments' device buffers hold their current
  /// values (commitCarried ran and no invalidateCarried since), so run()
  /// uploads none of them.
  bool carriedCurrent = false;

  Impl(const Artifact &a, CudaExecutorOptions o)
      : artifact(&a), plan(a.plan), options(o) {}
  ~Impl();

  void ck(CUresult r, const std::string &what) const { check(*d, r, what); }
  /// A device buffer of `bytes` for `what` (named in an out-of-memory
  /// error, allocationError).
  CUdeviceptr alloc(int64_t bytes, const std::string &what);
  /// Throws allocationError's message for a failed allocation.
  void checkAlloc(CUresult r, const std::string &what, int64_t bytes) const;
  /// An event destroyed with the executor; `timing`: one that
  /// cuEventElapsedTime can read (the ops' own have no timing).
  CUevent event(bool timing = false);
  void init();
  void allocate();
  bool prepareStep(int64_t k, Op &op);
  void prepareOps(const CopySchedule &sched);
  CUfunction function(const std::string &kernel);
  void prepareHostStep(int64_t k, Op &op);
  void prepareKernel(const PlanStep &s, Op &op);
  void prepareMatmul(const MatmulCall &call, Op &op);
  /// Enqueues matmul `m` with algorithm `algo` on `s`.
  cublasStatus_t launchMatmul(const MatmulOp &m,
                              const cublasLtMatmulAlgo_t &algo, CUstream s);
  /// tuneMatmuls: times each shape's candidates (CudaMatmul.cpp), or takes
  /// options.tuneCache's pick, sets every matmul's algorithm to its
  /// shape's fastest, and forgets them.
  void tuneMatmulAlgos();
  /// The device and cuBLASLt a tuned pick is valid for (MatmulTuneCache).
  std::string tuneScope() const;
  /// Whether cuBLASLt accepts `algo` for `m` within the workspace.
  bool algoFits(const MatmulOp &m, const cublasLtMatmulAlgo_t &algo) const;
  /// Shapes timed and shapes taken from the tuning cache (matmulTuning).
  int tunedShapes = 0, cachedShapes = 0;
  /// Collectives (CudaCollectives.cpp).
  void prepareCollective(int64_t k, Op &op);
  void prepareLocalShard(int64_t k);
  void recordCollective(const Op &op);
  void destroyCollectives();
  /// Enqueues every op on the stream. `timed` (a run outside the graph):
  /// a timing event is recorded on the compute stream before the first op
  /// and after every op that runs a plan step there, in timed->events;
  /// timed->steps names each one's plan step and lane.
  struct Timing {
    std::vector<CUevent> events; ///< reused across profiled runs
    std::vector<std::pair<int64_t, Lane>> steps;
  };
  void record(Timing *timed = nullptr);
  void capture();
  Timing timing;
};

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_CUDAEXECUTORIMPL_H
