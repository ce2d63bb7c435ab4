//===- FiniteGuard.cpp - Names the op behind a non-finite step ------------===//
//
// A value is known by its key (scope, buffer id): scope -1 for the plan's
// buffers, k for the body buffers of the fusion at plan step k. A body's
// arguments are its fusion's operands and the fusion's results are its
// body's results, so those keys are aliases, resolved before use; the
// fusion step itself is then no producer of anything, its fused ops are.
//
//===----------------------------------------------------------------------===//

#include "runtime/FiniteGuard.h"

#include "runtime/cpu/Executor.h"

#include <cmath>
#include <map>
#include <set>

namespace step::rt {
namespace {

using Key = std::pair<int64_t, int64_t>;

/// The non-finite elements of one tensor.
struct Scan {
  int64_t nans = 0, infs = 0, first = -1;
  double firstValue = 0;
  bool bad() const { return nans + infs > 0; }
};

Scan scan(const HostTensor &t) {
  Scan s;
  if (!isFloat(t.dtype()))
    return s;
  auto see = [&](int64_t i, double v) {
    if (std::isfinite(v))
      return;
    (std::isnan(v) ? s.nans : s.infs) += 1;
    if (s.first < 0) {
      s.first = i;
      s.firstValue = v;
    }
  };
  if (t.dtype() == DType::F32) {
    const float *p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      see(i, p[i]);
  } else {
    // f16 and bf16 convert to double exactly, Inf and NaN included.
    for (int64_t i = 0; i < t.numel(); ++i)
      see(i, t.getAsDouble(i));
  }
  return s;
}

/// One op the re-run executed.
struct Event {
  const Plan *plan;
  const PlanStep *step;
  size_t index;
  int64_t fusion;
  std::vector<Key> operands;
};

/// A value the re-run saw: its scan, and the event that produced it (-1:
/// an argument or constant, first seen as an operand).
struct Seen {
  Scan scan;
  int64_t producer = -1;
  size_t result = 0;
};

class Recorder {
public:
  explicit Recorder(const Plan &plan) : plan_(plan) {
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      const PlanStep &s = plan.steps[k];
      if (!s.body)
        continue;
      auto f = static_cast<int64_t>(k);
      for (size_t j = 0; j < s.body->arguments.size(); ++j)
        alias_[{f, s.body->arguments[j]}] = {-1, s.operands.at(j)};
      for (size_t i = 0; i < s.body->results.size(); ++i)
        alias_[{-1, s.results.at(i)}] = {f, s.body->results[i]};
    }
  }

  void operator()(const cpu::StepEvent &e) {
    if (e.fusion < 0 && e.step.body)
      return; // its fused ops were seen one by one
    Event event{&e.plan, &e.step, e.index, e.fusion, {}};
    for (size_t i = 0; i < e.step.operands.size(); ++i) {
      Key k = resolve({e.fusion, e.step.operands[i]});
      if (!seen_.count(k))
        seen_[k] = Seen{scan(e.operands[i]), -1, 0};
      event.operands.push_back(k);
    }
    auto producer = static_cast<int64_t>(events_.size());
    for (size_t i = 0; i < e.step.results.size(); ++i)
      seen_[resolve({e.fusion, e.step.results[i]})] =
          Seen{scan(e.results[i]), producer, i};
    events_.push_back(std::move(event));
  }

  Key resolve(Key k) const {
    for (auto it = alias_.find(k); it != alias_.end(); it = alias_.find(k))
      k = it->second;
    return k;
  }

  /// The origins of the non-finite operands of the check_finite ops
  /// that compute `guard` (see the header).
  std::vector<Key> origins(Key guard) const {
    std::vector<Key> stack{guard}, seeds, roots;
    std::set<Key> visited;
    while (!stack.empty()) {
      Key k = stack.back();
      stack.pop_back();
      const Seen *v = find(k);
      if (!visited.insert(k).second || !v || v->producer < 0)
        continue;
      const Event &e = events_[v->producer];
      bool check = e.step->op == "step.check_finite";
      for (Key operand : e.operands)
        if (!check)
          stack.push_back(operand);
        else if (find(operand)->scan.bad())
          seeds.push_back(operand);
    }
    visited.clear();
    stack = seeds;
    while (!stack.empty()) {
      Key k = stack.back();
      stack.pop_back();
      if (!visited.insert(k).second)
        continue;
      const Seen &v = *find(k);
      bool fed = false;
      if (v.producer >= 0)
        for (Key operand : events_[v.producer].operands)
          if (find(operand)->scan.bad()) {
            fed = true;
            stack.push_back(operand);
          }
      if (!fed)
        roots.push_back(k);
    }
    return roots;
  }

  const Seen *find(Key k) const {
    auto it = seen_.find(k);
    return it == seen_.end() ? nullptr : &it->second;
  }
  const Event &event(int64_t i) const { return events_[i]; }

  const BufferDesc &buffer(Key k) const {
    const Plan &p = k.first < 0 ? plan_ : *plan_.steps[k.first].body;
    return p.buffers[k.second];
  }

private:
  const Plan &plan_;
  std::map<Key, Key> alias_;
  std::map<Key, Seen> seen_;
  std::vector<Event> events_;
};

Shape unflatten(int64_t i, const Shape &shape) {
  Shape index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return index;
}

std::string number(double v) {
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

} // namespace

int64_t guardResult(const Artifact &artifact) {
  if (!artifact.meta.contains("guard"))
    return -1;
  const nlohmann::json &guard = artifact.meta["guard"];
  std::string name =
      guard.is_object() && guard.contains("finite") &&
              guard["finite"].is_string()
          ? guard["finite"].get<std::string>()
          : "";
  const Plan &plan = artifact.plan;
  for (size_t i = 0; i < plan.results.size() && i < plan.resultNames.size();
       ++i) {
    if (name.empty() || plan.resultNames[i] != name)
      continue;
    const BufferDesc &b = plan.buffers.at(plan.results[i]);
    if (b.dtype != DType::I1 || !b.shape.empty())
      throw Error("the artifact's guard result '" + name + "' is " +
                  typeStr(b.dtype, b.shape) + ", expected i1 []");
    return static_cast<int64_t>(i);
  }
  throw Error("the artifact's meta \"guard\" is " + guard.dump() +
              ", but the plan returns no result of that name (expected "
              "{\"finite\": \"" + kGuardResult + "\"})");
}

bool guardTripped(const Artifact &artifact,
                  const std::vector<HostTensor> &results) {
  int64_t g = guardResult(artifact);
  if (g < 0)
    return false;
  if (static_cast<size_t>(g) >= results.size())
    throw Error("the step returned " + std::to_string(results.size()) +
                " results, no guard result " + std::to_string(g));
  return results[g].getAsDouble(0) == 0;
}

NonFiniteOrigin findNonFinite(const Artifact &artifact,
                              const std::vector<const HostTensor *> &args) {
  int64_t g = guardResult(artifact);
  if (g < 0)
    throw Error("findNonFinite: the step has no guard (compile it with "
                "stepc --guard-finite)");
  Recorder recorder(artifact.plan);
  std::vector<HostTensor> results =
      cpu::execute(artifact, args, std::ref(recorder));
  NonFiniteOrigin origin;
  if (results.at(g).getAsDouble(0) != 0)
    return origin;
  origin.reproduced = true;
  std::vector<Key> roots =
      recorder.origins(recorder.resolve({-1, artifact.plan.results[g]}));
  if (roots.empty())
    return origin;
  // Arguments (the data), then constants, then the op that ran first.
  auto rank = [&](Key k) {
    int64_t p = recorder.find(k)->producer;
    if (p >= 0)
      return std::make_pair(int64_t(2), p);
    bool constant = recorder.buffer(k).kind == BufferKind::Constant;
    return std::make_pair(int64_t(constant), k.second);
  };
  Key best = roots.front();
  for (Key k : roots)
    if (rank(k) < rank(best))
      best = k;

  const Seen &v = *recorder.find(best);
  const BufferDesc &b = recorder.buffer(best);
  origin.dtype = b.dtype;
  origin.shape = b.shape;
  origin.nans = v.scan.nans;
  origin.infs = v.scan.infs;
  origin.firstIndex = unflatten(v.scan.first, b.shape);
  origin.firstValue = v.scan.firstValue;
  if (v.producer < 0) {
    origin.buffer = b.name;
    origin.kind = bufferKindName(b.kind);
    return origin;
  }
  const Event &e = recorder.event(v.producer);
  origin.op = e.step->op;
  origin.location = e.step->location;
  origin.step = static_cast<int64_t>(e.index);
  origin.fusion = e.fusion;
  origin.result = v.result;
  return origin;
}

std::string describe(const NonFiniteOrigin &o) {
  if (!o.reproduced)
    return "the CPU re-run of the step found its loss and gradients finite: "
           "the NaN/Inf did not reproduce there";
  if (o.op.empty() && o.buffer.empty())
    return "the CPU re-run found no NaN/Inf feeding the guard";
  std::string counts = std::to_string(o.nans) + " NaN and " +
                       std::to_string(o.infs) + " Inf of " +
                       std::to_string(numElements(o.shape)) + " elements";
  std::string first = "the first at " + shapeToString(o.firstIndex) + " (" +
                      number(o.firstValue) + ")";
  std::string type = std::string(dtypeName(o.dtype)) + " " +
                     shapeToString(o.shape);
  if (o.op.empty())
    return o.kind + " '" + o.buffer + "' (" + type + ") holds " + counts +
           ", " + first;
  std::string where = o.location.empty() ? "" : " at " + o.location;
  std::string step =
      o.fusion < 0 ? "plan step " + std::to_string(o.step)
                   : "fused op " + std::to_string(o.step) +
                         " of the fusion at plan step " +
                         std::to_string(o.fusion);
  return o.op + where + " (" + step + ") made " + counts + " in result " +
         std::to_string(o.result) + " (" + type +
         ") from finite operands, " + first;
}

void throwNonFinite(const Artifact &artifact,
                    const std::vector<const HostTensor *> &args,
                    const std::string &backend) {
  std::string update;
  const Plan &plan = artifact.plan;
  for (size_t i = 0; i < plan.arguments.size() && i < args.size(); ++i) {
    const BufferDesc &b = plan.buffers.at(plan.arguments[i]);
    if (b.name == "opt.step" && args[i]->numel() == 1)
      update = " (opt.step = " +
               std::to_string(static_cast<int64_t>(args[i]->getAsDouble(0))) +
               " before it)";
  }
  NonFiniteOrigin origin = findNonFinite(artifact, args);
  throw Error("non-finite guard: the loss or a gradient of this step" +
              update + " is not finite on the " + backend + " backend; " +
              describe(origin) +
              "; the step was not applied (params and optimizer state are "
              "as before it)");
}

} // namespace step::rt
