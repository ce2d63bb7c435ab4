//===- Executor.cpp - Runs an execution plan on the CPU kernels -----------===//
//
// Memory says where each buffer's bytes live during one run: the arena for
// transients, the host arena for step.offload results (on the CPU both are
// host memory, but kept apart so a plan's two arenas are checked as the GPU
// uses them), the caller's tensors for arguments, owned copies for constants
// (and for any non-transient buffer a step writes). Each step's kernel runs
// through evalStep (EvalStep.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Executor.h"

#include "runtime/Comm.h"
#include "runtime/cpu/EvalStep.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <optional>
#include <thread>

namespace step::rt::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Memory: the bytes of every buffer during one run
//===----------------------------------------------------------------------===//

class Memory {
public:
  explicit Memory(const Plan &plan)
      : plan_(plan), arena_(static_cast<size_t>(plan.arenaBytes)),
        host_(static_cast<size_t>(plan.hostBytes)),
        external_(plan.buffers.size(), nullptr), owned_(plan.buffers.size()),
        defined_(plan.buffers.size(), 0) {}

  /// The caller's tensor stands for buffer `id` (not copied).
  void bindExternal(int64_t id, const HostTensor *t) {
    external_[id] = t;
    defined_[id] = 1;
  }

  /// Stores `t` as buffer `id`: transients into their arena slot, host
  /// buffers into theirs in the host arena.
  void write(int64_t id, HostTensor t) {
    const BufferDesc &b = plan_.buffers[id];
    if (uint8_t *slot = slotOf(b)) {
      if (t.byteSize())
        std::memcpy(slot, t.raw(), t.byteSize());
    } else {
      owned_[id] = std::move(t);
      external_[id] = nullptr;
    }
    defined_[id] = 1;
  }

  /// The current value of buffer `id` (a copy; transients are read from the
  /// arena, so a slot overwritten since its write shows the damage).
  HostTensor read(int64_t id) const {
    if (!defined_[id])
      throw Error(bufferStr(plan_, id) + " is read before anything defines it");
    const BufferDesc &b = plan_.buffers[id];
    if (const uint8_t *slot = slotOf(b)) {
      HostTensor t(b.dtype, b.shape);
      if (t.byteSize())
        std::memcpy(t.raw(), slot, t.byteSize());
      return t;
    }
    return external_[id] ? *external_[id] : *owned_[id];
  }

private:
  /// The arena bytes of a transient or host buffer; null for the others.
  uint8_t *slotOf(const BufferDesc &b) {
    std::vector<uint8_t> *arena = b.kind == BufferKind::Transient ? &arena_
                                  : b.kind == BufferKind::Host    ? &host_
                                                                  : nullptr;
    return arena ? arena->data() + b.offset : nullptr;
  }
  const uint8_t *slotOf(const BufferDesc &b) const {
    return const_cast<Memory *>(this)->slotOf(b);
  }

  const Plan &plan_;
  std::vector<uint8_t> arena_, host_;
  std::vector<const HostTensor *> external_;
  std::vector<std::optional<HostTensor>> owned_;
  std::vector<char> defined_;
};

//===----------------------------------------------------------------------===//
// CommThread: collectives beside the compute steps
//===----------------------------------------------------------------------===//

/// One thread that runs posted tasks in order with `comm` installed.
/// After a task throws, the later ones do not run (each reports the first
/// error), as a rank stops at its first failed collective; so does the
/// destructor for those not started yet, after the running one ends.
class CommThread {
public:
  using Task = std::function<std::vector<HostTensor>()>;

  explicit CommThread(Communicator &comm)
      : comm_(comm), thread_([this] { loop(); }) {}
  ~CommThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  CommThread(const CommThread &) = delete;
  CommThread &operator=(const CommThread &) = delete;

  /// Queues `task`; returns its ticket for wait().
  size_t post(Task task) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(Job{std::move(task), {}, nullptr, false});
    cv_.notify_all();
    return jobs_.size() - 1;
  }

  /// Blocks until task `ticket` has run; returns its results or rethrows
  /// its error.
  std::vector<HostTensor> wait(size_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return jobs_[ticket].done; });
    Job &job = jobs_[ticket];
    if (job.error)
      std::rethrow_exception(job.error);
    return std::move(job.out);
  }

  /// Blocks until every task posted so far has run.
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return next_ == jobs_.size(); });
  }

private:
  struct Job {
    Task task;
    std::vector<HostTensor> out;
    std::exception_ptr error;
    bool done;
  };

  void loop() {
    CommScope scope(comm_);
    std::exception_ptr failed;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || next_ < jobs_.size(); });
      if (next_ == jobs_.size())
        return; // stopped, nothing left
      Job &job = jobs_[next_]; // a deque: stays put while others are posted
      Task task = std::move(job.task);
      std::vector<HostTensor> out;
      std::exception_ptr error = failed;
      if (!error && !stop_) {
        lock.unlock();
        try {
          out = task();
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
      } else if (!error) {
        error = std::make_exception_ptr(
            Error("not run: the step stopped before this collective"));
      }
      failed = failed ? failed : error;
      job.out = std::move(out);
      job.error = error;
      job.done = true;
      ++next_;
      cv_.notify_all();
    }
  }

  Communicator &comm_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  size_t next_ = 0; ///< the first job not done
  bool stop_ = false;
  std::thread thread_; ///< last: starts once the members above exist
};

//===----------------------------------------------------------------------===//
// Set-up checks
//===----------------------------------------------------------------------===//

void checkBufferId(const Plan &plan, int64_t id, const std::string &where) {
  if (id < 0 || id >= static_cast<int64_t>(plan.buffers.size()))
    throw Error(where + ": buffer id " + std::to_string(id) +
                " is out of range (the plan has " +
                std::to_string(plan.buffers.size()) + " buffers)");
}

/// Every byte range the run will touch lies inside its arena or section.
void checkLayout(const Plan &plan, const Artifact &artifact) {
  if (plan.arenaBytes < 0 || plan.hostBytes < 0)
    throw Error("plan: negative arena size " +
                std::to_string(std::min(plan.arenaBytes, plan.hostBytes)));
  auto section = artifact.sections.find("constants");
  for (size_t id = 0; id < plan.buffers.size(); ++id) {
    const BufferDesc &b = plan.buffers[id];
    int64_t limit;
    if (b.kind == BufferKind::Transient)
      limit = plan.arenaBytes;
    else if (b.kind == BufferKind::Host)
      limit = plan.hostBytes;
    else if (b.kind == BufferKind::Constant && section != artifact.sections.end())
      limit = static_cast<int64_t>(section->second.size());
    else if (b.kind == BufferKind::Constant)
      throw Error("plan: constant " + bufferStr(plan, id) +
                  " needs the artifact's \"constants\" section, which is "
                  "missing");
    else
      continue;
    if (b.offset < 0 || b.bytes() > limit || b.offset > limit - b.bytes())
      throw Error("plan: " + bufferStr(plan, id) + " of " +
                  std::to_string(b.bytes()) + " bytes at offset " +
                  std::to_string(b.offset) + " does not fit in the " +
                  (b.kind == BufferKind::Transient ? "arena"
                   : b.kind == BufferKind::Host    ? "host arena"
                                                   : "constants section") +
                  " of " + std::to_string(limit) + " bytes");
  }
}

} // namespace

std::vector<HostTensor> execute(const Artifact &artifact,
                                const std::vector<HostTensor> &args) {
  std::vector<const HostTensor *> ptrs;
  for (const HostTensor &t : args)
    ptrs.push_back(&t);
  return execute(artifact, ptrs);
}

std::vector<HostTensor> execute(const Artifact &artifact,
                                const std::vector<const HostTensor *> &args,
                                const StepObserver &observer) {
  ExecuteOptions options;
  options.observer = observer;
  return execute(artifact, args, options);
}

/// glibc serves allocations above its mmap threshold (128 KiB, growing
/// only as such blocks are freed) with fresh mmaps and trims freed heap
/// back to the kernel, so a step's activation-sized temporaries page-fault
/// fresh, kernel-zeroed pages every step. Raised once: a 256 MiB threshold
/// and a 512 MiB trim keep reusing the heap's pages (GPT-2 width 256, 2
/// layers, batch 8 x 128 on the 2-core box: 0.58-0.72 s to 0.52-0.54 s per
/// step, docs/runtime.md).
static void keepHeapPages() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
  });
#endif
}

std::vector<HostTensor> execute(const Artifact &artifact,
                                const std::vector<const HostTensor *> &args,
                                const ExecuteOptions &options) {
  keepHeapPages();
  const StepObserver &observer = options.observer;
  const Plan &plan = artifact.plan;
  RunTimeline *timeline = options.timeline;
  if (timeline) {
    timeline->plan = &plan;
    timeline->spans.clear();
    timeline->start = steadySeconds();
  }
  checkLayout(plan, artifact);
  Memory memory(plan);

  if (args.size() != plan.arguments.size())
    throw Error("plan '" + plan.function + "' takes " +
                std::to_string(plan.arguments.size()) + " arguments, got " +
                std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    int64_t id = plan.arguments[i];
    checkBufferId(plan, id, "argument " + std::to_string(i));
    const BufferDesc &b = plan.buffers[id];
    if (args[i]->dtype() != b.dtype || args[i]->shape() != b.shape)
      throw Error("argument " + std::to_string(i) + " ('" + b.name + "', " +
                  bufferKindName(b.kind) + "): expected " +
                  typeStr(b.dtype, b.shape) + ", found " +
                  typeStr(args[i]->dtype(), args[i]->shape()));
    if (b.kind == BufferKind::Transient)
      memory.write(id, *args[i]);
    else
      memory.bindExternal(id, args[i]);
  }

  for (size_t id = 0; id < plan.buffers.size(); ++id) {
    const BufferDesc &b = plan.buffers[id];
    if (b.kind != BufferKind::Constant)
      continue;
    HostTensor t(b.dtype, b.shape);
    if (t.byteSize())
      std::memcpy(t.raw(), artifact.sections.at("constants").data() + b.offset,
                  t.byteSize());
    memory.write(id, std::move(t));
  }

  auto stepWhere = [&](size_t k) {
    return "plan step " + std::to_string(k) + " (" + plan.steps[k].op + ")";
  };
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    for (int64_t id : plan.steps[k].operands)
      checkBufferId(plan, id, stepWhere(k));
    for (int64_t id : plan.steps[k].results)
      checkBufferId(plan, id, stepWhere(k));
  }

  // Stores step k's kernel results after checking them against its buffers.
  auto store = [&](size_t k, std::vector<HostTensor> out,
                   const std::vector<HostTensor> *seen) {
    const PlanStep &s = plan.steps[k];
    std::string where = stepWhere(k);
    if (out.size() != s.results.size())
      throw Error(where + ": the kernel produced " +
                  std::to_string(out.size()) + " results, the step names " +
                  std::to_string(s.results.size()) + " result buffers");
    for (size_t i = 0; i < out.size(); ++i) {
      const BufferDesc &b = plan.buffers[s.results[i]];
      if (out[i].dtype() != b.dtype || out[i].shape() != b.shape)
        throw Error(where + ": result " + std::to_string(i) + " is " +
                    typeStr(out[i].dtype(), out[i].shape()) + " but " +
                    bufferStr(plan, s.results[i]) + " is declared " +
                    typeStr(b.dtype, b.shape));
    }
    if (observer)
      observer(StepEvent{plan, s, k, -1, *seen, out});
    for (size_t i = 0; i < out.size(); ++i)
      memory.write(s.results[i], std::move(out[i]));
  };
  auto rethrow = [&](size_t k) {
    try {
      throw;
    } catch (const Error &e) {
      throw Error(stepWhere(k) + ": " + e.what());
    } catch (const nlohmann::json::exception &e) {
      throw Error(stepWhere(k) + ": bad attributes: " + e.what());
    }
  };

  // Overlapped collectives: joinAt[j] lists those to store before step j
  // (j = the number of steps: at the end).
  Communicator &comm = currentCommunicator();
  std::optional<CommThread> commThread;
  std::vector<std::vector<int64_t>> joinAt(plan.steps.size() + 1);
  std::vector<size_t> ticket(plan.steps.size());
  // Overlapped collectives' spans, written on their thread, read after
  // their join.
  std::vector<StepSpan> collectiveSpans(timeline ? plan.steps.size() : 0);
  if (options.overlapCollectives && !observer && comm.size() > 1 &&
      comm.anyThread()) {
    for (const CollectiveSpan &c : collectiveSchedule(plan))
      joinAt[static_cast<size_t>(c.waitBefore)].push_back(c.step);
    bool any = false;
    for (const auto &j : joinAt)
      any = any || !j.empty();
    if (any)
      commThread.emplace(comm);
  }
  auto join = [&](size_t j) {
    for (int64_t c : joinAt[j]) {
      auto k = static_cast<size_t>(c);
      std::vector<HostTensor> out;
      try {
        out = commThread->wait(ticket[k]);
      } catch (...) {
        rethrow(k);
      }
      if (timeline)
        timeline->spans.push_back(collectiveSpans[k]);
      store(k, std::move(out), nullptr);
    }
  };

  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const PlanStep &s = plan.steps[k];
    if (commThread) {
      join(k);
      // A local_shard of a replica group may make the group's communicator
      // (a collective call): not while the thread may be in one.
      if (s.op == "step.local_shard")
        commThread->drain();
    }
    std::vector<HostTensor> out, seen;
    try {
      std::vector<HostTensor> in;
      for (int64_t id : s.operands)
        in.push_back(memory.read(id));
      if (commThread && isCollective(s.op)) {
        StepSpan *span = timeline ? &collectiveSpans[k] : nullptr;
        ticket[k] = commThread->post(
            [&plan, &s, k, span, in = std::move(in)]() mutable {
              double start = span ? steadySeconds() : 0;
              std::vector<HostTensor> r = evalStep(plan, s, std::move(in));
              if (span)
                *span = {static_cast<int64_t>(k), Lane::Collective, start,
                         steadySeconds()};
              return r;
            });
        continue;
      }
      double start = timeline ? steadySeconds() : 0;
      if (!observer) {
        out = evalStep(plan, s, std::move(in));
      } else {
        seen = in;
        FusedOpObserver inside =
            [&](const Plan &body, size_t i, const std::vector<HostTensor> &a,
                const std::vector<HostTensor> &r) {
              observer(StepEvent{body, body.steps[i], i,
                                 static_cast<int64_t>(k), a, r});
            };
        out = evalStep(plan, s, std::move(in), &inside);
      }
      if (timeline)
        timeline->spans.push_back({static_cast<int64_t>(k),
                                   s.host                ? Lane::Host
                                   : isCollective(s.op) ? Lane::Collective
                                                        : Lane::Compute,
                                   start, steadySeconds()});
    } catch (...) {
      rethrow(k);
    }
    store(k, std::move(out), &seen);
  }
  if (commThread)
    join(plan.steps.size());
  if (timeline)
    timeline->end = steadySeconds();

  std::vector<HostTensor> results;
  for (size_t i = 0; i < plan.results.size(); ++i) {
    std::string where = "plan result " + std::to_string(i);
    checkBufferId(plan, plan.results[i], where);
    try {
      results.push_back(memory.read(plan.results[i]));
    } catch (const Error &e) {
      throw Error(where + ": " + e.what());
    }
  }
  return results;
}

} // namespace step::rt::cpu
