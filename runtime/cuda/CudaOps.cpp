//===- CudaOps.cpp - The CUDA executor's list of prepared launches --------===//
//
// Every plan step becomes an Op holding the exact device pointers it uses
// (a kernel launch, a cuBLASLt matmul, a host step, a collective), and
// copySchedule's offload and reload copies become fork and join Ops around
// them; CudaBackend.cpp records the list into a graph.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaExecutorImpl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace step::rt::cuda {

//===----------------------------------------------------------------------===//
// The Op list: launches, copy forks and joins
//===----------------------------------------------------------------------===//

/// Prepares the launch of plan step `k` (not a copy) into `op`; false when
/// the step moves nothing (an alias view, an empty copy).
bool CudaExecutor::Impl::prepareStep(int64_t k, Op &op) {
  const PlanStep &s = plan.steps[k];
  op.step = k;
  try {
    if (!s.kernel.empty()) {
      prepareKernel(s, op);
    } else if (s.op == "step.matmul") {
      if (s.operands.size() != 2 || s.results.size() != 1)
        throw Error(op.where + ": expected 2 operands and 1 result");
      MatmulCall call;
      call.lhs = s.operands[0];
      call.rhs = s.operands[1];
      call.result = s.results[0];
      call.attrs = &s.attrs;
      prepareMatmul(call, op);
    } else if (isMatmulFusion(s)) {
      // One cuBLASLt call with an epilogue (MatmulEpilogue.h).
      FusedMatmul f = readMatmulFusion(s, op.where);
      MatmulCall call;
      call.lhs = s.operands.at(f.lhs);
      call.rhs = s.operands.at(f.rhs);
      call.result = s.results.at(f.result);
      call.bias = f.bias >= 0 ? s.operands.at(f.bias) : -1;
      call.aux = f.aux >= 0         ? s.operands.at(f.aux)
                 : f.auxResult >= 0 ? s.results.at(f.auxResult)
                                    : -1;
      call.biasGrad = f.biasGrad >= 0 ? s.results.at(f.biasGrad) : -1;
      call.attrs = &f.matmul->attrs;
      call.epilogue = f.epilogue;
      prepareMatmul(call, op);
    } else if ((s.op == "step.reshape" || s.op == "step.stop_gradient") &&
               s.operands.size() == 1 && s.results.size() == 1) {
      const BufferDesc &in = plan.buffers[s.operands[0]];
      const BufferDesc &out = plan.buffers[s.results[0]];
      if (in.bytes() != out.bytes() || in.dtype != out.dtype)
        throw Error(op.where + ": copies " + typeStr(in.dtype, in.shape) +
                    " into " + typeStr(out.dtype, out.shape));
      op.kind = Op::Copy;
      op.src = ptrOf[s.operands[0]];
      op.dst = ptrOf[s.results[0]];
      op.bytes = static_cast<size_t>(in.bytes());
      if (op.src == op.dst || op.bytes == 0)
        return false; // an alias: nothing to move
    } else if (s.op == "step.all_reduce" || s.op == "step.reduce_scatter" ||
               s.op == "step.all_gather") {
      prepareCollective(k, op);
    } else {
      throw Error(op.where + ": the artifact has no CUDA kernel for this "
                  "step and the CUDA backend has no library call for it; "
                  "recompile with a stepc built with the CUDA toolkit (not "
                  "--no-kernels) or use --backend=cpu");
    }
  } catch (const nlohmann::json::exception &e) {
    throw Error(op.where + ": bad launch configuration in meta.kernels: " +
                e.what());
  }
  return true;
}

/// Builds the whole Op list: the steps' launches with the copies' forks and
/// joins placed where `sched` says.
void CudaExecutor::Impl::prepareOps(const CopySchedule &sched) {
  auto n = static_cast<int64_t>(plan.steps.size());
  auto where = [&](int64_t k) {
    return "plan step " + std::to_string(k) + " (" + plan.steps[k].op + ")";
  };
  // A stream that never joins a capture must not be joined into it either
  // (waiting on an event recorded outside the capture is an isolation
  // error): only streams with copies exist.
  if (!sched.offloads.empty())
    ck(d->cuStreamCreate(&d2h, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (!sched.reloads.empty())
    ck(d->cuStreamCreate(&h2d, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  // Overlapped collectives: each one's `done`, by step, made up front so
  // an offload of its result can wait for it too.
  std::map<int64_t, CUevent> collectiveDone;
  std::vector<std::vector<int64_t>> collectiveJoinAt(n + 1);
  if (options.overlapCollectives)
    for (const CollectiveSpan &c : collectiveSchedule(plan)) {
      collectiveDone[c.step] = event();
      collectiveJoinAt[c.waitBefore].push_back(c.step);
    }
  if (!collectiveDone.empty())
    ck(d->cuStreamCreate(&commStream, CU_STREAM_NON_BLOCKING),
       "cuStreamCreate");
  // The fork of each copy, by step; offloads name reloads' `done` events,
  // so reloads come first.
  std::map<int64_t, Op> fork;
  // A copy of step k's operand into its result: device addresses from
  // ptrOf, host ones from hostOf (each step has one host side).
  auto copy = [&](int64_t k, Op::Kind kind) -> Op & {
    const PlanStep &s = plan.steps[k];
    Op &op = fork[k];
    op.kind = kind;
    op.where = where(k);
    int64_t in = s.operands[0], out = s.results[0];
    op.host = kind == Op::CopyIn ? hostOf[in] : hostOf[out];
    op.src = ptrOf[in];
    op.dst = ptrOf[out];
    op.bytes = static_cast<size_t>(plan.buffers[out].bytes());
    op.ready = event();
    op.done = event();
    return op;
  };
  for (const CopySchedule::Reload &r : sched.reloads)
    copy(r.step, Op::CopyIn);
  for (const CopySchedule::Offload &o : sched.offloads) {
    Op &op = copy(o.step, Op::CopyOut);
    for (int64_t r : o.afterReloads)
      op.after.push_back(fork.at(r).done);
    // It forks right after its operand's producer: when that is a
    // collective on its own stream, the copy waits for the collective.
    if (auto c = collectiveDone.find(o.issueAfter); c != collectiveDone.end())
      op.after.push_back(c->second);
  }
  // Offload forks after step k go to issueAt[k + 1] (slot 0: the start);
  // reload joins before step k to joinAt[k] (slot n: the end).
  std::vector<std::vector<int64_t>> issueAt(n + 1), joinAt(n + 1);
  for (const CopySchedule::Offload &o : sched.offloads)
    issueAt[o.issueAfter + 1].push_back(o.step);
  for (const CopySchedule::Reload &r : sched.reloads)
    joinAt[r.waitBefore].push_back(r.step);
  auto wait = [&](int64_t copy, const std::string &when) {
    Op op;
    op.kind = Op::Wait;
    op.where = where(copy) + ": joining its copy " + when;
    op.done = fork.at(copy).done;
    ops.push_back(std::move(op));
  };
  auto issue = [&](int64_t slot) {
    for (int64_t k : issueAt[slot])
      ops.push_back(fork.at(k));
  };
  issue(0);
  auto joinCollectives = [&](int64_t slot, const std::string &when) {
    for (int64_t c : collectiveJoinAt[slot]) {
      Op op;
      op.kind = Op::Wait;
      op.where = where(c) + ": joining the collective " + when;
      op.done = collectiveDone.at(c);
      ops.push_back(std::move(op));
    }
  };
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t r : joinAt[k])
      wait(r, "before " + where(k));
    joinCollectives(k, "before " + where(k));
    const PlanStep &s = plan.steps[k];
    if (s.host) {
      // A reload still copying out of host bytes this step writes (the
      // host arena reuses a slot once its last reload has forked) must
      // finish first.
      for (const CopySchedule::Reload &r : sched.reloads)
        if (r.step < k && r.waitBefore > k)
          for (int64_t id : s.results)
            if (sharesBytes(plan.buffers[plan.steps[r.step].operands[0]],
                            plan.buffers[id])) {
              wait(r.step, "before host " + where(k) + " reuses its bytes");
              break;
            }
      Op op;
      op.where = where(k);
      op.step = k;
      prepareHostStep(k, op);
      ops.push_back(std::move(op));
    } else if (s.op == "step.offload") {
      // The memory plan frees the operand's bytes after this step.
      wait(k, "at its position");
    } else if (s.op == "step.reload") {
      ops.push_back(fork.at(k));
    } else if (s.op == "step.local_shard") {
      prepareLocalShard(k);
    } else {
      Op op;
      op.where = where(k);
      if (prepareStep(k, op)) {
        if (auto c = collectiveDone.find(k); c != collectiveDone.end()) {
          op.ready = event();
          op.done = c->second;
        }
        ops.push_back(std::move(op));
      }
    }
    issue(k + 1);
  }
  for (int64_t r : joinAt[n])
    wait(r, "at the end of the run");
  joinCollectives(n, "at the end of the run");
  // Every copy was joined through its `done`; joining the streams' last
  // state too keeps a capture valid whatever they recorded after it.
  for (CUstream s : {d2h, h2d, commStream})
    if (s) {
      Op op;
      op.kind = Op::Join;
      op.where = std::string("joining the ") +
                 (s == d2h   ? "device-to-host copy"
                  : s == h2d ? "host-to-device copy"
                             : "collective") +
                 " stream";
      op.copyStream = s;
      op.done = event();
      ops.push_back(std::move(op));
    }
}

} // namespace step::rt::cuda
