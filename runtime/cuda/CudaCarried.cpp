//===- CudaCarried.cpp - Arguments a CUDA executor keeps on the device ----===//
//
// Params and optimizer state go from a step's results back to its
// arguments on the device (setCarried, commitCarried), come to the host
// only when asked (fetchArgument), and move to another executor's buffers
// with device-to-device copies when a Session switches buckets
// (adoptCarried).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaExecutorImpl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace step::rt::cuda {

//===----------------------------------------------------------------------===//
// Carried arguments
//===----------------------------------------------------------------------===//

void CudaExecutor::setCarried(
    const std::vector<std::pair<size_t, size_t>> &pairs) {
  Impl &x = *impl_;
  const Plan &plan = x.plan;
  std::vector<bool> isArgument(plan.buffers.size(), false);
  for (int64_t id : plan.arguments)
    isArgument[static_cast<size_t>(id)] = true;
  x.carried.clear();
  x.carriedArgument.assign(plan.arguments.size(), false);
  x.carriedResult.assign(plan.results.size(), false);
  x.carriedCurrent = false;
  x.carriedInPlace = false;
  for (auto [arg, r] : pairs) {
    if (arg >= plan.arguments.size() || r >= plan.results.size())
      throw Error("setCarried: argument " + std::to_string(arg) +
                  " from result " + std::to_string(r) + ": plan '" +
                  plan.function + "' has " +
                  std::to_string(plan.arguments.size()) + " arguments and " +
                  std::to_string(plan.results.size()) + " results");
    int64_t a = plan.arguments[arg], res = plan.results[r];
    const BufferDesc &ab = plan.buffers.at(a), &rb = plan.buffers.at(res);
    // A result that is another argument's buffer would be overwritten by
    // that argument's own commit, or is an input uploaded every run.
    bool kept = (ab.kind == BufferKind::Param ||
                 ab.kind == BufferKind::State) &&
                !inHostMemory(ab) && !inHostMemory(rb) &&
                ab.dtype == rb.dtype && ab.shape == rb.shape &&
                (res == a || !isArgument[static_cast<size_t>(res)]) &&
                !x.carriedArgument[arg];
    if (!kept)
      continue;
    x.carried.emplace_back(arg, r);
    x.carriedArgument[arg] = true;
    x.carriedResult[r] = true;
    x.carriedInPlace |= res == a;
  }
}

const std::vector<std::pair<size_t, size_t>> &CudaExecutor::carried() const {
  return impl_->carried;
}

bool CudaExecutor::updatesInPlace() const { return impl_->carriedInPlace; }

void CudaExecutor::commitCarried() {
  Impl &x = *impl_;
  const Plan &plan = x.plan;
  x.ck(x.d->cuCtxSetCurrent(x.ctx), "cuCtxSetCurrent");
  // Half committed, the buffers hold neither step's values: a failure
  // leaves them stale.
  x.carriedCurrent = false;
  for (auto [arg, r] : x.carried) {
    int64_t a = plan.arguments[arg], res = plan.results[r];
    auto bytes = static_cast<size_t>(plan.buffers[a].bytes());
    if (x.ptrOf[a] == x.ptrOf[res] || bytes == 0)
      continue; // one buffer: the run wrote the argument's own
    x.ck(x.d->cuMemcpyDtoDAsync(x.ptrOf[a], x.ptrOf[res], bytes, x.stream),
         "committing " + bufferStr(plan, res) + " into " +
             bufferStr(plan, a));
  }
  x.carriedCurrent = true;
}

void CudaExecutor::fetchArgument(size_t arg, HostTensor &out) {
  Impl &x = *impl_;
  const Plan &plan = x.plan;
  if (arg >= plan.arguments.size())
    throw Error("fetchArgument: plan '" + plan.function + "' has " +
                std::to_string(plan.arguments.size()) + " arguments, not " +
                std::to_string(arg + 1));
  int64_t id = plan.arguments[arg];
  const BufferDesc &b = plan.buffers.at(id);
  auto bytes = static_cast<size_t>(b.bytes());
  // A default HostTensor is an f32 scalar of no bytes: compare sizes too.
  if (out.dtype() != b.dtype || out.shape() != b.shape ||
      out.byteSize() != bytes)
    out = HostTensor(b.dtype, b.shape);
  x.ck(x.d->cuCtxSetCurrent(x.ctx), "cuCtxSetCurrent");
  std::string what = "downloading " + bufferStr(plan, id);
  if (bytes && !inHostMemory(b))
    x.ck(x.d->cuMemcpyDtoHAsync(out.raw(), x.ptrOf[id], bytes, x.stream),
         what);
  // After the commit's copies (and, for pageable memory, this one).
  x.ck(x.d->cuStreamSynchronize(x.stream), what);
  if (bytes && inHostMemory(b))
    std::memcpy(out.raw(), x.hostOf[id], bytes);
}

void CudaExecutor::invalidateCarried() { impl_->carriedCurrent = false; }

void CudaExecutor::adoptCarried(
    const CudaExecutor &from,
    const std::vector<std::pair<size_t, size_t>> &pairs) {
  Impl &x = *impl_;
  const Impl &f = *from.impl_;
  const Plan &plan = x.plan;
  x.carriedCurrent = false;
  if (!f.carriedCurrent)
    throw Error("adoptCarried: plan '" + f.plan.function +
                "' holds no committed values to take");
  x.ck(x.d->cuCtxSetCurrent(x.ctx), "cuCtxSetCurrent");
  // Its commit's copies (and anything else it queued) are done.
  x.ck(x.d->cuStreamSynchronize(f.stream), "adoptCarried: waiting");
  std::vector<bool> taken(plan.arguments.size(), false);
  for (auto [mine, theirs] : pairs) {
    if (mine >= plan.arguments.size() || theirs >= f.plan.arguments.size() ||
        !x.carriedArgument[mine] || !f.carriedArgument[theirs])
      throw Error("adoptCarried: argument " + std::to_string(mine) +
                  " from argument " + std::to_string(theirs) +
                  ": both must be carried arguments of their plans");
    int64_t a = plan.arguments[mine], b = f.plan.arguments[theirs];
    const BufferDesc &ab = plan.buffers.at(a), &bb = f.plan.buffers.at(b);
    if (ab.dtype != bb.dtype || ab.shape != bb.shape)
      throw Error("adoptCarried: " + bufferStr(plan, a) + " from " +
                  bufferStr(f.plan, b) + ": dtype or shape differ");
    if (auto bytes = static_cast<size_t>(ab.bytes()))
      x.ck(x.d->cuMemcpyDtoDAsync(x.ptrOf[a], f.ptrOf[b], bytes, x.stream),
           "adopting " + bufferStr(plan, a));
    taken[mine] = true;
  }
  for (auto [arg, r] : x.carried)
    if (!taken[arg])
      throw Error("adoptCarried: carried " +
                  bufferStr(plan, plan.arguments[arg]) + " was not given");
  x.carriedCurrent = true;
}

} // namespace step::rt::cuda
