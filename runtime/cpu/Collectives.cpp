//===- Collectives.cpp - all_reduce, reduce_scatter, all_gather, local_shard
//
// The CPU kernels of StepDistOps.td on the communicator installed for the
// calling thread (runtime/Comm.h). f16/bf16 are widened to f32, reduced,
// and rounded once, as NCCL's reductions of half types accumulate in
// float on the GPU here too. mean is the sum divided by the group size.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include <cstring>

namespace step::rt::cpu {
namespace {

CommOp reduceOpOf(const std::string &reduce, const char *op, bool scatter) {
  if (reduce == "sum" || reduce == "mean")
    return CommOp::Sum;
  if (!scatter && reduce == "max")
    return CommOp::Max;
  if (!scatter && reduce == "min")
    return CommOp::Min;
  throw Error(std::string(op) + ": reduce \"" + reduce + "\" is not " +
              (scatter ? "sum or mean" : "sum, mean, max or min"));
}

/// The elementwise reduction of `x` over `comm`, in x's dtype.
HostTensor reduceOver(Communicator &comm, const HostTensor &x,
                      const std::string &reduce, const char *op,
                      bool scatter) {
  CommOp rop = reduceOpOf(reduce, op, scatter);
  bool half = x.dtype() == DType::F16 || x.dtype() == DType::BF16;
  if (reduce == "mean" && !isFloat(x.dtype()))
    throw Error(std::string(op) + ": reduce \"mean\" needs a float tensor, "
                                  "found " +
                dtypeName(x.dtype()));
  HostTensor acc = half ? cast(x, DType::F32) : x;
  comm.allReduce(acc.raw(), acc.raw(), acc.numel(), acc.dtype(), rop);
  if (reduce == "mean") {
    auto *p = acc.data<float>();
    auto g = static_cast<float>(comm.size());
    for (int64_t i = 0; i < acc.numel(); ++i)
      p[i] /= g;
  }
  return half ? cast(acc, x.dtype()) : acc;
}

Shape withDim0(const HostTensor &x, int64_t d0, const char *op) {
  if (x.rank() < 1)
    throw Error(std::string(op) + ": needs a tensor of rank >= 1, found " +
                shapeToString(x.shape()));
  Shape s = x.shape();
  s[0] = d0;
  return s;
}

} // namespace

HostTensor allReduce(const HostTensor &x, const std::string &reduce,
                     const ReplicaGroups &groups) {
  Communicator &comm = groupOf(currentCommunicator(), groups, "all_reduce");
  return reduceOver(comm, x, reduce, "all_reduce", false);
}

HostTensor reduceScatter(const HostTensor &x, const std::string &reduce,
                         const ReplicaGroups &groups) {
  const char *op = "reduce_scatter";
  Communicator &comm = groupOf(currentCommunicator(), groups, op);
  int64_t g = comm.size();
  if (x.rank() < 1 || x.shape()[0] % g != 0)
    throw Error(std::string(op) + ": dim 0 of " + shapeToString(x.shape()) +
                " is not divisible by the group size " + std::to_string(g));
  HostTensor all = reduceOver(comm, x, reduce, op, true);
  HostTensor out(x.dtype(), withDim0(x, x.shape()[0] / g, op));
  std::memcpy(out.raw(),
              static_cast<const uint8_t *>(all.raw()) +
                  out.byteSize() * static_cast<size_t>(comm.rank()),
              out.byteSize());
  return out;
}

HostTensor allGather(const HostTensor &x, const ReplicaGroups &groups) {
  const char *op = "all_gather";
  Communicator &comm = groupOf(currentCommunicator(), groups, op);
  HostTensor out(x.dtype(), withDim0(x, x.shape().empty()
                                            ? 0
                                            : x.shape()[0] * comm.size(),
                                     op));
  comm.allGather(x.raw(), out.raw(), static_cast<int64_t>(x.byteSize()));
  return out;
}

HostTensor localShard(const HostTensor &x, const ReplicaGroups &groups) {
  Communicator &comm = groupOf(currentCommunicator(), groups, "local_shard");
  return shardOf(x, comm.rank(), comm.size());
}

} // namespace step::rt::cpu
