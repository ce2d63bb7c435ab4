//===- CudaCollectives.cpp - NCCL for the collective steps ---------------===//
//
// The CUDA backend's lowering of StepDistOps.td: all_reduce,
// reduce_scatter and all_gather are NCCL calls on a collective stream,
// forked from the compute stream at their position and joined where
// rt::collectiveSchedule says (or on the compute stream itself without
// overlapCollectives); through events, so a CUDA graph captures them with
// the kernels; local_shard is a memset of
// the block and a device copy of this rank's elements. NCCL is opened with
// dlopen like the driver (libnccl.so.2), only for a plan that has
// collectives. One NCCL communicator per replica groups of the plan (the
// whole world, or e.g. a tensor-parallel mesh's groups), each this rank's
// group, bootstrapped over the group's rt::Communicator (groupOf: an MPI
// sub-communicator, or TCP's lockstep group): the group's rank 0 makes the
// unique id and broadcasts it to the others. Made in plan order, so every
// rank makes them in the same order.
// Half types are reduced by NCCL in their own type (the CPU backend
// reduces them in f32). Written against nccl.h; run on an H200 with one
// rank, never with several GPUs (docs/distributed.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaExecutorImpl.h"

#ifdef STEP_HAVE_NCCL
#include <nccl.h>
#endif

#include <mutex>

namespace step::rt::cuda {

#ifdef STEP_HAVE_NCCL
namespace {

#define STEP_NCCL_SYMBOLS(X)                                                   \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRank)                                                          \
  X(ncclCommDestroy)                                                           \
  X(ncclGetErrorString)                                                        \
  X(ncclAllReduce)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclAllGather)

class NcclSymbols : public Library {
public:
#define STEP_NCCL_DECLARE(name) decltype(&::name) name = nullptr;
  STEP_NCCL_SYMBOLS(STEP_NCCL_DECLARE)
#undef STEP_NCCL_DECLARE
  static std::unique_ptr<NcclSymbols> load(std::string *reason) {
    auto t = std::make_unique<NcclSymbols>();
    if (!t->openFirst("NCCL", {"libnccl.so.2", "libnccl.so"}, reason))
      return nullptr;
#define STEP_NCCL_RESOLVE(name)                                                \
  if (!t->resolve(#name, &t->name, reason))                                    \
    return nullptr;
    STEP_NCCL_SYMBOLS(STEP_NCCL_RESOLVE)
#undef STEP_NCCL_RESOLVE
    return t;
  }
};

std::string ncclErrorMessage(const NcclSymbols &n, ncclResult_t r,
                             const std::string &what) {
  const char *text = n.ncclGetErrorString(r);
  std::string message = "NCCL error in " + what + ": " +
                        (text ? text : "unknown result") + " (ncclResult_t " +
                        std::to_string(static_cast<int>(r)) + ")";
  // The collective cannot finish without the peer: say so, so that the
  // user restarts every rank rather than looking for a local bug.
  if (r == ncclRemoteError)
    message += "; another rank exited or its network failed, so every rank "
               "of the run stops (restart them all, from a checkpoint)";
  return message;
}

const NcclSymbols &nccl() {
  static std::once_flag once;
  static std::unique_ptr<NcclSymbols> table;
  static std::string reason;
  std::call_once(once, [] { table = NcclSymbols::load(&reason); });
  if (!table)
    throw Error("the plan has collectives but NCCL is not available: " +
                reason);
  return *table;
}

void nck(const NcclSymbols &n, ncclResult_t r, const std::string &what) {
  if (r != ncclSuccess)
    throw Error(ncclErrorMessage(n, r, what));
}

ncclDataType_t ncclType(DType t, const std::string &where) {
  switch (t) {
  case DType::F32: return ncclFloat32;
  case DType::F16: return ncclFloat16;
  case DType::BF16: return ncclBfloat16;
  case DType::I32: return ncclInt32;
  case DType::I64: return ncclInt64;
  case DType::I1: return ncclUint8;
  }
  throw Error(where + ": no NCCL type for this dtype");
}

ncclRedOp_t ncclOp(const std::string &reduce, DType t,
                   const std::string &where) {
  if (reduce == "sum" && t != DType::I1)
    return ncclSum;
  if (reduce == "mean")
    return ncclAvg;
  if (reduce == "max")
    return ncclMax;
  if (reduce == "min")
    return ncclMin;
  throw Error(where + ": reduce \"" + reduce + "\" has no NCCL lowering for " +
              dtypeName(t));
}

} // namespace

std::string ncclErrorMessage(int result, const std::string &what) {
  return ncclErrorMessage(nccl(), static_cast<ncclResult_t>(result), what);
}
#else
std::string ncclErrorMessage(int, const std::string &) {
  throw Error("this build of the runtime has no nccl.h, so it cannot name "
              "NCCL results");
}
#endif

/// The communicator of the step's replica group (groupOf's checks: the
/// world size the plan was compiled for); `key` names the groups.
static Communicator &groupOfStep(const PlanStep &s, Communicator &comm,
                                 const std::string &where, std::string *key) {
  ReplicaGroups groups{s.attrs.at("group_size").get<int64_t>(),
                       s.attrs.at("replica_groups").get<std::vector<int64_t>>()};
  if (key)
    *key = partitionName(groups);
  return groupOf(comm, groups, where);
}

void CudaExecutor::Impl::prepareLocalShard(int64_t k) {
  const PlanStep &s = plan.steps[k];
  std::string where = "plan step " + std::to_string(k) + " (" + s.op + ")";
  Communicator &comm = groupOfStep(
      s, options.comm ? *options.comm : selfCommunicator(), where, nullptr);
  const BufferDesc &in = plan.buffers.at(s.operands.at(0));
  const BufferDesc &out = plan.buffers.at(s.results.at(0));
  auto elt = static_cast<int64_t>(dtypeSize(in.dtype));
  int64_t n = numElements(in.shape), block = numElements(out.shape);
  int64_t begin = std::min(n, comm.rank() * block);
  int64_t end = std::min(n, begin + block);
  Op zero;
  zero.kind = Op::Zero;
  zero.where = where;
  zero.dst = ptrOf[s.results[0]];
  zero.bytes = static_cast<size_t>(block * elt);
  ops.push_back(zero);
  if (end > begin) {
    Op copy = zero;
    copy.kind = Op::Copy;
    copy.src = ptrOf[s.operands[0]] + static_cast<CUdeviceptr>(begin * elt);
    copy.bytes = static_cast<size_t>((end - begin) * elt);
    ops.push_back(copy);
  }
}

#ifdef STEP_HAVE_NCCL
void CudaExecutor::Impl::prepareCollective(int64_t k, Op &op) {
  const PlanStep &s = plan.steps[k];
  std::string key;
  Communicator &comm = groupOfStep(
      s, options.comm ? *options.comm : selfCommunicator(), op.where, &key);
  const NcclSymbols &n = nccl();
  void *&made = ncclComms[key];
  if (!made) {
    ncclUniqueId id{};
    if (comm.rank() == 0)
      nck(n, n.ncclGetUniqueId(&id), "ncclGetUniqueId");
    comm.broadcast(&id, sizeof id, 0);
    ncclComm_t c = nullptr;
    nck(n, n.ncclCommInitRank(&c, comm.size(), id, comm.rank()),
       op.where + ": ncclCommInitRank (" + std::to_string(comm.size()) +
           " ranks)");
    made = c;
  }
  op.ncclComm = made;
  const BufferDesc &in = plan.buffers.at(s.operands.at(0));
  const BufferDesc &out = plan.buffers.at(s.results.at(0));
  op.kind = Op::Collective;
  op.src = ptrOf[s.operands[0]];
  op.dst = ptrOf[s.results[0]];
  op.ncclType = ncclType(in.dtype, op.where);
  if (s.op == "step.all_gather") {
    op.collective = Op::AllGather;
    op.count = static_cast<size_t>(numElements(in.shape));
  } else {
    op.collective =
        s.op == "step.all_reduce" ? Op::AllReduce : Op::ReduceScatter;
    op.ncclOp = ncclOp(s.attrs.at("reduce").get<std::string>(), in.dtype,
                       op.where);
    op.count = static_cast<size_t>(numElements(out.shape));
  }
}

void CudaExecutor::Impl::recordCollective(const Op &op) {
  const NcclSymbols &n = nccl();
  auto c = static_cast<ncclComm_t>(op.ncclComm);
  auto type = static_cast<ncclDataType_t>(op.ncclType);
  auto red = static_cast<ncclRedOp_t>(op.ncclOp);
  // Overlapped (`done` set): fork the collective stream off the compute
  // stream here; the compute stream joins it through a Wait on `done`.
  CUstream on = op.done ? commStream : stream;
  if (op.done) {
    ck(d->cuEventRecord(op.ready, stream), op.where + ": cuEventRecord");
    ck(d->cuStreamWaitEvent(on, op.ready, 0), op.where + ": cuStreamWaitEvent");
  }
  auto st = reinterpret_cast<cudaStream_t>(on);
  auto *src = reinterpret_cast<const void *>(op.src);
  auto *dst = reinterpret_cast<void *>(op.dst);
  switch (op.collective) {
  case Op::AllReduce:
    nck(n, n.ncclAllReduce(src, dst, op.count, type, red, c, st),
       op.where + ": ncclAllReduce");
    break;
  case Op::ReduceScatter:
    nck(n, n.ncclReduceScatter(src, dst, op.count, type, red, c, st),
       op.where + ": ncclReduceScatter");
    break;
  case Op::AllGather:
    nck(n, n.ncclAllGather(src, dst, op.count, type, c, st),
       op.where + ": ncclAllGather");
    break;
  }
  if (op.done)
    ck(d->cuEventRecord(op.done, on), op.where + ": cuEventRecord");
}

void CudaExecutor::Impl::destroyCollectives() {
  for (auto &[key, c] : ncclComms)
    if (c)
      nccl().ncclCommDestroy(static_cast<ncclComm_t>(c));
  ncclComms.clear();
}
#else
void CudaExecutor::Impl::prepareCollective(int64_t, Op &op) {
  throw Error(op.where + ": this build of the runtime has no nccl.h, so the "
                         "CUDA backend cannot run collectives; use "
                         "--backend=cpu");
}
void CudaExecutor::Impl::recordCollective(const Op &) {}
void CudaExecutor::Impl::destroyCollectives() {}
#endif

} // namespace step::rt::cuda
