//===- Profile.cpp - Timelines of plan runs, Chrome traces, profiles ------===//

#include "runtime/Profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>

namespace step::rt {

const char *laneName(Lane lane) {
  switch (lane) {
  case Lane::Run:
    return "steps";
  case Lane::Compute:
    return "compute";
  case Lane::Collective:
    return "collectives";
  case Lane::Copy:
    return "copies";
  case Lane::Host:
    return "host";
  case Lane::Input:
    return "input";
  }
  return "?";
}

double steadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StepCost stepCost(const Plan &plan, const PlanStep &step) {
  StepCost c;
  c.flops = step.flops;
  if (isView(plan, step))
    return c;
  for (int64_t id : step.operands)
    c.bytesRead += plan.buffers.at(static_cast<size_t>(id)).bytes();
  for (int64_t id : step.results)
    c.bytesWritten += plan.buffers.at(static_cast<size_t>(id)).bytes();
  return c;
}

namespace {
bool isMatmulStep(const PlanStep &s) {
  return s.op == "step.matmul" ||
         (s.op == "step.fusion" && s.attrs.is_object() &&
          s.attrs.value("kind", std::string()) == "matmul");
}
} // namespace

std::string stepLabel(const Plan &plan, const PlanStep &step) {
  if (!step.kernel.empty())
    return step.kernel;
  std::string op = step.op.rfind("step.", 0) == 0 ? step.op.substr(5) : step.op;
  // Steps without a kernel of their own (cuBLASLt or OpenBLAS matmuls,
  // the CPU backend's reference kernels) are told apart by position.
  size_t index = static_cast<size_t>(&step - plan.steps.data());
  if (index < plan.steps.size())
    op += "#" + std::to_string(index);
  return op;
}

const char *stepCategory(const Plan &plan, const PlanStep &step) {
  if (step.host)
    return "host";
  if (isCollective(step.op))
    return "collective";
  if (step.op == "step.offload" || step.op == "step.reload")
    return "copy";
  if (isView(plan, step))
    return "view";
  if (isMatmulStep(step))
    return "matmul";
  return step.kernel.empty() ? "op" : "kernel";
}

//===----------------------------------------------------------------------===//
// ChromeTrace
//===----------------------------------------------------------------------===//

void ChromeTrace::addRun(int64_t stepNumber, const RunTimeline &run,
                         bool withSteps) {
  runs_.emplace_back(run.start, run.end);
  nlohmann::json runArgs = {{"step", stepNumber}};
  if (run.plan)
    runArgs["plan_steps"] = run.plan->steps.size();
  events_.push_back({"step " + std::to_string(stepNumber), "step", Lane::Run,
                     run.start, run.end, std::move(runArgs)});
  if (!withSteps || !run.plan)
    return;
  const Plan &plan = *run.plan;
  for (const StepSpan &span : run.spans) {
    const PlanStep &s = plan.steps.at(static_cast<size_t>(span.index));
    StepCost cost = stepCost(plan, s);
    nlohmann::json args = {{"plan_step", span.index},
                           {"op", s.op},
                           {"bytes_read", cost.bytesRead},
                           {"bytes_written", cost.bytesWritten},
                           {"flops", cost.flops}};
    if (!s.kernel.empty())
      args["kernel"] = s.kernel;
    if (!s.location.empty())
      args["location"] = s.location;
    if (s.body) {
      // The IR ops a fused kernel came from, with their model lines.
      nlohmann::json fused = nlohmann::json::array();
      for (const PlanStep &inner : s.body->steps)
        fused.push_back(inner.location.empty()
                            ? inner.op
                            : inner.op + " @ " + inner.location);
      args["fused_ops"] = std::move(fused);
    }
    events_.push_back({stepLabel(plan, s), stepCategory(plan, s), span.lane,
                       span.start, span.end, std::move(args)});
  }
}

void ChromeTrace::addSpan(const std::string &name, const std::string &category,
                          Lane lane, double start, double end,
                          nlohmann::json args) {
  events_.push_back({name, category, lane, start, end, std::move(args)});
}

double ChromeTrace::idleBetweenRuns() const {
  if (runs_.size() < 2)
    return 0;
  std::vector<std::pair<double, double>> runs = runs_;
  std::sort(runs.begin(), runs.end());
  double busy = 0, reach = runs.front().first;
  for (const auto &[start, end] : runs) {
    // Overlapping runs (none today) count once.
    double from = std::max(start, reach);
    if (end > from)
      busy += end - from;
    reach = std::max(reach, end);
  }
  double total = reach - runs.front().first;
  return total > 0 ? std::max(0.0, 1.0 - busy / total) : 0;
}

nlohmann::json ChromeTrace::toJson() const {
  double origin = std::numeric_limits<double>::infinity();
  for (const Event &e : events_)
    origin = std::min(origin, e.start);
  nlohmann::json events = nlohmann::json::array();
  const int pid = 1;
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid},
                    {"tid", 0}, {"args", {{"name", "StepJIT"}}}});
  for (Lane lane : {Lane::Run, Lane::Input, Lane::Compute, Lane::Collective,
                    Lane::Copy, Lane::Host}) {
    int tid = static_cast<int>(lane);
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid},
                      {"tid", tid}, {"args", {{"name", laneName(lane)}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"},
                      {"pid", pid}, {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  for (const Event &e : events_) {
    double ts = (e.start - origin) * 1e6;
    double dur = std::max(0.0, (e.end - e.start) * 1e6);
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", ts},
                      {"dur", dur},
                      {"pid", pid},
                      {"tid", static_cast<int>(e.lane)},
                      {"args", e.args}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

//===----------------------------------------------------------------------===//
// Profiles
//===----------------------------------------------------------------------===//

std::vector<KernelProfile>
profileKernels(const std::vector<RunTimeline> &runs) {
  std::map<std::string, KernelProfile> byLabel;
  for (const RunTimeline &run : runs) {
    if (!run.plan)
      continue;
    for (const StepSpan &span : run.spans) {
      if (span.lane == Lane::Copy)
        continue; // overlapped transfers, not kernel time
      const PlanStep &s = run.plan->steps.at(static_cast<size_t>(span.index));
      if (isView(*run.plan, s))
        continue;
      std::string label = stepLabel(*run.plan, s);
      KernelProfile &p = byLabel[label];
      p.label = label;
      p.category = stepCategory(*run.plan, s);
      StepCost cost = stepCost(*run.plan, s);
      p.calls += 1;
      p.seconds += std::max(0.0, span.end - span.start);
      p.bytes += cost.bytesRead + cost.bytesWritten;
      p.flops += cost.flops;
    }
  }
  std::vector<KernelProfile> rows;
  for (auto &entry : byLabel)
    rows.push_back(std::move(entry.second));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelProfile &a, const KernelProfile &b) {
                     return a.seconds > b.seconds;
                   });
  return rows;
}

namespace {
std::string format(const char *fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}
std::string share(double achieved, double peak) {
  return peak > 0 ? format("%.1f%%", 100 * achieved / peak) : "-";
}
} // namespace

std::string profileTable(const std::vector<KernelProfile> &rows, size_t top,
                         const DevicePeaks &peaks) {
  double total = 0;
  for (const KernelProfile &r : rows)
    total += r.seconds;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "%-44s %-10s %6s %10s %6s %9s %6s %9s %6s\n", "kernel",
                "kind", "calls", "total ms", "share", "GB/s", "of pk",
                "TFLOP/s", "of pk");
  out += line;
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const KernelProfile &r = rows[i];
    double gbps = r.seconds > 0 ? r.bytes / r.seconds / 1e9 : 0;
    double tflops = r.seconds > 0 ? r.flops / r.seconds / 1e12 : 0;
    std::string label = r.label.size() > 44 ? r.label.substr(0, 41) + "..."
                                            : r.label;
    std::snprintf(line, sizeof line,
                  "%-44s %-10s %6lld %10.3f %6s %9.2f %6s %9.4f %6s\n",
                  label.c_str(), r.category.c_str(),
                  static_cast<long long>(r.calls), r.seconds * 1e3,
                  share(r.seconds, total).c_str(), gbps,
                  share(gbps * 1e9, peaks.bytesPerSecond).c_str(), tflops,
                  share(tflops * 1e12, peaks.flopsPerSecond).c_str());
    out += line;
  }
  if (rows.size() > top)
    out += "(" + std::to_string(rows.size() - top) + " more kernels)\n";
  out += "peaks: " + (peaks.device.empty() ? std::string("?") : peaks.device) +
         ", " +
         (peaks.bytesPerSecond > 0
              ? format("%.0f GB/s", peaks.bytesPerSecond / 1e9)
              : std::string("bandwidth unknown")) +
         ", " +
         (peaks.flopsPerSecond > 0
              ? format("%.1f TFLOP/s", peaks.flopsPerSecond / 1e12)
              : std::string("FLOP/s unknown")) +
         "\n";
  return out;
}

} // namespace step::rt
