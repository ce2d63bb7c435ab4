//===- Profile.h - Timelines of plan runs, Chrome traces, profiles -*- C++ -*-===//
//
// A backend asked for a timeline (Session::step's `timeline`) records when
// each step of the plan ran and on which lane: the compute thread or
// stream, the collective thread or stream, the copy streams, the host. This
// file turns timelines into
//   - a Chrome trace (the Trace Event Format's JSON object form, which
//     Perfetto and chrome://tracing open): one complete ("X") event per
//     step with its op, kernel, model location, bytes and FLOPs, plus one
//     per run and per input wait, on named lanes; step-run --trace writes it
//     (docs/profiling.md);
//   - a profile: per kernel, calls, time, and achieved bandwidth and FLOP/s,
//     against the device's peaks when they are known; step-run --profile
//     prints it.
// Pure bookkeeping over a Plan; no backend code, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_PROFILE_H
#define STEP_RUNTIME_PROFILE_H

#include "runtime/Plan.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace step::rt {

/// Where a timed interval ran: one trace lane each.
enum class Lane : uint8_t {
  Run,        ///< a whole run of the plan (one training step)
  Compute,    ///< the compute thread (CPU) or stream (GPU)
  Collective, ///< the collective thread or stream
  Copy,       ///< the offload / reload copy streams
  Host,       ///< host steps (ZeRO-Offload's update)
  Input,      ///< waiting for the batch (reading, or the prefetcher)
};
const char *laneName(Lane lane);

/// Seconds on the steady clock, the time base of every span.
double steadySeconds();

/// Step `index` of a plan ran on `lane` from `start` to `end` (seconds,
/// steadySeconds()).
struct StepSpan {
  int64_t index = 0;
  Lane lane = Lane::Compute;
  double start = 0, end = 0;
};

/// One run of one plan, as a backend recorded it.
struct RunTimeline {
  /// The plan that ran (a bucket's plan for a bucketed artifact); it must
  /// outlive the timeline's use.
  const Plan *plan = nullptr;
  double start = 0, end = 0; ///< the whole run, argument upload included
  std::vector<StepSpan> spans;
};

/// What one run of a step moves and computes: the bytes of its operands
/// and results (a fusion's, not its body's: what reaches memory), and its
/// PlanStep::flops. A view moves nothing.
struct StepCost {
  int64_t bytesRead = 0, bytesWritten = 0, flops = 0;
};
StepCost stepCost(const Plan &plan, const PlanStep &step);

/// The name a step has in traces and profiles: its generated kernel, else
/// its op's mnemonic and its index in `plan` ("matmul#3", "fusion#12":
/// cuBLASLt or OpenBLAS calls, the CPU backend's reference kernels).
/// `step` must be an element of plan.steps.
std::string stepLabel(const Plan &plan, const PlanStep &step);
/// "kernel", "matmul", "copy" (offload / reload), "collective", "host",
/// "view" or "op" (a step with no kernel: the CPU backend's reference
/// kernels).
const char *stepCategory(const Plan &plan, const PlanStep &step);

/// Builds a Chrome trace from runs and input waits. Times are written in
/// microseconds from the earliest span added.
class ChromeTrace {
public:
  /// A run as "step N" on the Run lane and, with `withSteps`, each of its
  /// plan steps as an event on its lane.
  void addRun(int64_t stepNumber, const RunTimeline &run, bool withSteps);
  /// Any other interval (an input wait), on `lane`.
  void addSpan(const std::string &name, const std::string &category,
               Lane lane, double start, double end,
               nlohmann::json args = nlohmann::json::object());
  /// The fraction of the time from the first run's start to the last
  /// run's end during which no run was in progress (the device idle
  /// between steps); 0 with fewer than two runs.
  double idleBetweenRuns() const;
  /// {"traceEvents": [...], "displayTimeUnit": "ms"}, lane names as
  /// metadata events.
  nlohmann::json toJson() const;

private:
  struct Event {
    std::string name, category;
    Lane lane;
    double start, end;
    nlohmann::json args;
  };
  std::vector<Event> events_;
  std::vector<std::pair<double, double>> runs_;
};

/// One row of a profile: every call of one kernel (stepLabel) summed.
struct KernelProfile {
  std::string label, category;
  int64_t calls = 0;
  double seconds = 0;
  int64_t bytes = 0, flops = 0;
};

/// Sums the compute-lane, collective and host steps of `runs` per label,
/// slowest first (ties by label: deterministic).
std::vector<KernelProfile> profileKernels(const std::vector<RunTimeline> &runs);

/// The device's peaks a profile compares against; 0: unknown (the column
/// says "-").
struct DevicePeaks {
  std::string device;
  double bytesPerSecond = 0, flopsPerSecond = 0;
};

/// The top `top` rows as a text table: calls, total ms, share of the
/// summed kernel time, GB/s and TFLOP/s achieved, and each as a share of
/// the peak.
std::string profileTable(const std::vector<KernelProfile> &rows, size_t top,
                         const DevicePeaks &peaks);

} // namespace step::rt

#endif // STEP_RUNTIME_PROFILE_H
