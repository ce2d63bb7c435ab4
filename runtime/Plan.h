//===- Plan.h - The execution plan of a compiled step -----------*- C++ -*-===//
//
// What the compiler hands the runtime: buffers (params, optimizer state,
// inputs, constants, and transient values placed in one arena by
// step-memory-plan) and a list of steps, one per op, in program order. A step
// names its op ("step.add"), its attributes as JSON (the op's attributes,
// MLIR-free: numbers, arrays, enum words) and its operand and result buffers.
// Backends interpret steps: the CPU backend with the reference kernels of
// runtime/cpu, the CUDA backend with the kernel each step names. No MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_PLAN_H
#define STEP_RUNTIME_PLAN_H

#include "runtime/Tensor.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace step::rt {

struct Plan;

enum class BufferKind : uint8_t {
  Param,     ///< trainable, persistent, named (step.kind = "param")
  State,     ///< optimizer state, persistent, named (step.kind = "state")
  Input,     ///< batch data, supplied per step (step.kind = "input")
  Constant,  ///< bytes in the artifact's "constants" section
  Transient, ///< produced and consumed inside one step, in the arena
  Host,      ///< a step.offload result: transient, in the host arena
};
const char *bufferKindName(BufferKind k);
BufferKind bufferKindFromName(const std::string &name);
/// "buffer 7 ('h.0.w', param)" for messages.
std::string bufferStr(const Plan &plan, int64_t id);

struct BufferDesc {
  std::string name; ///< step.name for params/state/inputs; "%N" otherwise
  BufferKind kind = BufferKind::Transient;
  DType dtype = DType::F32;
  Shape shape;
  /// Transient: byte offset in the arena. Host: byte offset in the host
  /// arena. Constant: byte offset in the constants section. -1 otherwise.
  int64_t offset = -1;
  /// Param and State only: held in (pinned) host memory instead of device
  /// memory (step-offload-optimizer, ZeRO-Offload); only host steps and
  /// step.reload read it.
  bool host = false;

  int64_t bytes() const {
    return numElements(shape) * static_cast<int64_t>(dtypeSize(dtype));
  }
};

struct PlanStep {
  std::string op;          ///< "step.add", ...
  nlohmann::json attrs;    ///< the op's attributes (object)
  std::vector<int64_t> operands, results; ///< buffer ids
  std::string kernel;      ///< generated CUDA kernel, "" when none
  /// Where the op came from: "file:line" (traced C++) or "file:line:col"
  /// (a .mlir model), "" when unknown. Error messages name it (the
  /// non-finite guard, runtime/FiniteGuard.h); nothing executes by it.
  std::string location;
  /// step.fusion only: the fused ops as a plan of their own whose arguments
  /// are the step's operands and whose results are the step's results. Its
  /// buffers are all Transient with offset -1: values inside a fusion live
  /// in registers on the GPU and in temporaries on the CPU, never in the
  /// arena.
  std::shared_ptr<const Plan> body;
  /// Runs on the host CPU, on host buffers (step-offload-optimizer): its
  /// operands are host, host-memory param/state or constant buffers, its
  /// results host buffers. The CUDA backend runs it with the CPU kernel
  /// in stream order; the CPU backend as any step.
  bool host = false;
  /// Floating-point operations of one run of the step, as the compiler's
  /// cost model counts them (2 M N K for a matmul, the fused ops' sum for
  /// a fusion; passes/Activations.h, opFlops); 0 when unknown. Profiles
  /// (runtime/Profile.h) divide it by the step's time; nothing executes by
  /// it.
  int64_t flops = 0;
};

/// One compiled function (the artifact holds @train_step).
struct Plan {
  std::string function;
  std::vector<BufferDesc> buffers;
  std::vector<PlanStep> steps;
  std::vector<int64_t> arguments; ///< buffer ids, in function order
  std::vector<int64_t> results;   ///< buffer ids, in function order
  std::vector<std::string> resultNames;
  int64_t arenaBytes = 0;
  /// The host arena (pinned memory on a GPU) holding the Host buffers,
  /// the values step-offload moves out of the device arena (0: none).
  int64_t hostBytes = 0;

  /// Checks internal consistency (ids in range, every operand defined before
  /// use, transient buffers inside the arena, host buffers inside the host
  /// arena; buffers in host memory read only by step.reload and host steps,
  /// host buffers written only by step.offload and host steps; host steps
  /// touching host memory and constants only; fusion bodies whose
  /// signature is their step's); throws Error naming the first violation.
  /// Called by the artifact reader. `isBody`: this is a fusion body (no
  /// arena).
  void validate(bool isBody = false) const;
};

/// Whether step `s` of `plan` is a view: a reshape or stop_gradient whose
/// result step-memory-plan placed at its operand's arena offset. It moves
/// nothing and has no kernel.
bool isView(const Plan &plan, const PlanStep &s);

/// Whether buffers `a` and `b` share a byte of one arena (both Transient,
/// or both Host). Empty buffers share none.
bool sharesBytes(const BufferDesc &a, const BufferDesc &b);

/// Whether `b` lives in host memory: a Host buffer (the host arena) or a
/// param or state buffer held on the host (BufferDesc::host).
bool inHostMemory(const BufferDesc &b);

/// Whether `op` names a collective a backend may run beside the compute
/// steps: step.all_reduce, step.reduce_scatter or step.all_gather.
bool isCollective(const std::string &op);

/// A collective step run beside the compute steps (docs/runtime.md,
/// "Overlapped collectives"): it starts at its position, after every
/// earlier step, and must have finished before step `waitBefore`.
struct CollectiveSpan {
  int64_t step = 0;
  /// The first later step that reads its result, writes bytes of its
  /// operands or results, or touches its results' bytes (a view included);
  /// plan.steps.size() when none does (the end of the run).
  int64_t waitBefore = 0;
};

/// Every collective step of `plan` with the span in which it may run on
/// its own (a communication thread on the CPU, a stream on the GPU);
/// collectives among themselves stay in plan order. Pure; O(C * N) for C
/// collectives and N steps.
std::vector<CollectiveSpan> collectiveSchedule(const Plan &plan);

/// Device launches of one call of `plan`: one per step (a generated kernel,
/// or one cuBLASLt call for a matmul or a matmul fusion) except views and
/// host steps.
int64_t launchCount(const Plan &plan);

nlohmann::json toJson(const Plan &plan);
Plan planFromJson(const nlohmann::json &j);

} // namespace step::rt

#endif // STEP_RUNTIME_PLAN_H
