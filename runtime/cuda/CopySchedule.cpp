//===- CopySchedule.cpp - When offload and reload copies meet compute -----===//
//
// step-offload moves activations to a pinned host arena and back. On the GPU
// each copy runs on a copy stream; this file decides, from the plan alone,
// where each copy forks from the compute stream and where the compute stream
// joins it again. A step.offload forks right after its operand is produced
// (so the transfer overlaps the steps up to the offload's position, where
// the memory plan frees the device bytes) and joins at its position. A
// step.reload forks at its position (where the memory plan hands it the
// destination bytes) and joins before the first later step touching those
// bytes in the device arena, or at the end of the run.
//
// A reload may also read a host step's result (step-offload-optimizer) or
// a param or state buffer held in host memory, which no step writes.
// Two hazards live outside the device arena's liveness, and both are
// resolved here rather than left to the executor (a third, a host step
// writing bytes a reload still reads, by a wait before the host step): a host arena slot reused
// by a later offload must not be overwritten while an earlier reload still
// reads it (the later offload forks no earlier than that reload and waits
// for its copy), and an offload of a reload's result must not read the
// destination before that reload's copy lands. Pure: no GPU, no CUDA header.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"

#include <algorithm>

namespace step::rt::cuda {
namespace {

std::string stepStr(const Plan &plan, int64_t k) {
  return "plan step " + std::to_string(k) + " (" + plan.steps[k].op + ")";
}

bool names(const std::vector<int64_t> &ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

} // namespace

CopySchedule copySchedule(const Plan &plan) {
  // Ids in range, copies of one buffer into one of the same size and the
  // right kinds, host bytes touched by copies only, every read after its
  // write (so a reload's host operand has an earlier offload).
  plan.validate();
  auto n = static_cast<int64_t>(plan.steps.size());
  CopySchedule sched;
  for (int64_t k = 0; k < n; ++k) {
    const PlanStep &s = plan.steps[k];
    if (s.op == "step.offload") {
      int64_t src = s.operands[0];
      const BufferDesc &in = plan.buffers[src];
      const BufferDesc &out = plan.buffers[s.results[0]];
      CopySchedule::Offload o;
      o.step = k;
      for (int64_t j = k - 1; j >= 0 && o.issueAfter < 0; --j)
        if (names(plan.steps[j].results, src))
          o.issueAfter = j;
      // A reused host slot: the copy stream runs earlier offloads in order,
      // so forking no earlier than they did keeps their writes first; an
      // earlier reload of those bytes must have forked, and finished.
      for (const CopySchedule::Offload &e : sched.offloads)
        if (sharesBytes(plan.buffers[plan.steps[e.step].results[0]], out))
          o.issueAfter = std::max(o.issueAfter, e.issueAfter);
      for (const CopySchedule::Reload &r : sched.reloads)
        if (sharesBytes(plan.buffers[plan.steps[r.step].operands[0]], out)) {
          o.issueAfter = std::max(o.issueAfter, r.step);
          o.afterReloads.push_back(r.step);
        }
      // The source is still being written by a reload the compute stream
      // has not joined yet (it is that reload's result, or a view of it).
      for (const CopySchedule::Reload &r : sched.reloads)
        if (r.step <= o.issueAfter && r.waitBefore > o.issueAfter &&
            sharesBytes(plan.buffers[plan.steps[r.step].results[0]], in) &&
            !names(o.afterReloads, r.step))
          o.afterReloads.push_back(r.step);
      std::sort(o.afterReloads.begin(), o.afterReloads.end());
      sched.offloads.push_back(std::move(o));
    } else if (s.op == "step.reload") {
      int64_t host = s.operands[0];
      const BufferDesc &in = plan.buffers[host];
      const BufferDesc &out = plan.buffers[s.results[0]];
      // The writer: an offload or a host step (validate() saw the buffer
      // written), or none for a param or state buffer in host memory.
      int64_t writer = -1;
      for (int64_t j = k - 1; j >= 0 && writer < 0; --j)
        if (names(plan.steps[j].results, host))
          writer = j;
      for (int64_t j = writer + 1; writer >= 0 && j < k; ++j)
        for (int64_t id : plan.steps[j].results)
          if (id != host && sharesBytes(plan.buffers[id], in))
            throw Error(stepStr(plan, k) + ": reads host " +
                        bufferStr(plan, host) + ", written by " +
                        stepStr(plan, writer) + ", but " + stepStr(plan, j) +
                        " overwrites its host bytes in between");
      CopySchedule::Reload r;
      r.step = k;
      r.waitBefore = n;
      for (int64_t j = k + 1; j < n && r.waitBefore == n; ++j)
        for (const std::vector<int64_t> *ids :
             {&plan.steps[j].operands, &plan.steps[j].results})
          for (int64_t id : *ids)
            if (sharesBytes(plan.buffers[id], out))
              r.waitBefore = j;
      sched.reloads.push_back(r);
    }
  }
  return sched;
}

} // namespace step::rt::cuda
