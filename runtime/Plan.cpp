//===- Plan.cpp - Plan JSON form and consistency checks -------------------===//

#include "runtime/Plan.h"

#include <algorithm>

namespace step::rt {

namespace {
constexpr const char *kKindNames[] = {"param",     "state", "input",
                                      "constant",  "transient", "host"};
constexpr int kKinds = sizeof(kKindNames) / sizeof(kKindNames[0]);

DType dtypeFromName(const std::string &name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64,
                  DType::I1})
    if (name == dtypeName(t))
      return t;
  throw Error("plan: unknown dtype '" + name + "'");
}
} // namespace

const char *bufferKindName(BufferKind k) {
  return kKindNames[static_cast<int>(k)];
}

std::string bufferStr(const Plan &plan, int64_t id) {
  const BufferDesc &b = plan.buffers.at(id);
  return "buffer " + std::to_string(id) + " ('" + b.name + "', " +
         bufferKindName(b.kind) + ")";
}

BufferKind bufferKindFromName(const std::string &name) {
  for (int k = 0; k < kKinds; ++k)
    if (name == kKindNames[k])
      return static_cast<BufferKind>(k);
  throw Error("plan: unknown buffer kind '" + name + "'");
}

namespace {
bool names(const std::vector<int64_t> &ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}
} // namespace

bool isView(const Plan &plan, const PlanStep &s) {
  if ((s.op != "step.reshape" && s.op != "step.stop_gradient") ||
      s.operands.size() != 1 || s.results.size() != 1)
    return false;
  const BufferDesc &in = plan.buffers.at(s.operands[0]);
  const BufferDesc &out = plan.buffers.at(s.results[0]);
  return in.kind == BufferKind::Transient &&
         out.kind == BufferKind::Transient && in.offset == out.offset;
}

bool sharesBytes(const BufferDesc &a, const BufferDesc &b) {
  bool arena = a.kind == BufferKind::Transient || a.kind == BufferKind::Host;
  return arena && a.kind == b.kind && a.offset < b.offset + b.bytes() &&
         b.offset < a.offset + a.bytes();
}

bool inHostMemory(const BufferDesc &b) {
  return b.kind == BufferKind::Host ||
         ((b.kind == BufferKind::Param || b.kind == BufferKind::State) &&
          b.host);
}

bool isCollective(const std::string &op) {
  return op == "step.all_reduce" || op == "step.reduce_scatter" ||
         op == "step.all_gather";
}

std::vector<CollectiveSpan> collectiveSchedule(const Plan &plan) {
  auto n = static_cast<int64_t>(plan.steps.size());
  auto buffer = [&](int64_t id) -> const BufferDesc & {
    return plan.buffers.at(static_cast<size_t>(id));
  };
  auto touches = [&](const std::vector<int64_t> &ids, const BufferDesc &b) {
    for (int64_t id : ids)
      if (sharesBytes(buffer(id), b))
        return true;
    return false;
  };
  std::vector<CollectiveSpan> spans;
  for (int64_t k = 0; k < n; ++k) {
    const PlanStep &c = plan.steps[k];
    if (!isCollective(c.op))
      continue;
    CollectiveSpan span{k, n};
    for (int64_t j = k + 1; j < n && span.waitBefore == n; ++j) {
      const PlanStep &s = plan.steps[j];
      bool hazard = false;
      // Read after write: the result, or bytes a later buffer shares with it.
      for (int64_t r : c.results)
        hazard = hazard || names(s.operands, r) ||
                 touches(s.operands, buffer(r)) ||
                 touches(s.results, buffer(r));
      // Write after read: the collective may still be reading its operands.
      for (int64_t o : c.operands)
        hazard = hazard || touches(s.results, buffer(o));
      if (hazard)
        span.waitBefore = j;
    }
    spans.push_back(span);
  }
  return spans;
}

int64_t launchCount(const Plan &plan) {
  int64_t n = 0;
  for (const PlanStep &s : plan.steps)
    n += !isView(plan, s) && !s.host;
  return n;
}

nlohmann::json toJson(const Plan &plan) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const BufferDesc &b : plan.buffers) {
    buffers.push_back({{"name", b.name},
                       {"kind", bufferKindName(b.kind)},
                       {"dtype", dtypeName(b.dtype)},
                       {"shape", b.shape},
                       {"offset", b.offset}});
    if (b.host)
      buffers.back()["memory"] = "host";
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const PlanStep &s : plan.steps) {
    nlohmann::json j = {{"op", s.op},
                        {"attrs", s.attrs.is_null() ? nlohmann::json::object()
                                                    : s.attrs},
                        {"operands", s.operands},
                        {"results", s.results}};
    if (!s.kernel.empty())
      j["kernel"] = s.kernel;
    if (s.host)
      j["host"] = true;
    if (!s.location.empty())
      j["location"] = s.location;
    if (s.flops)
      j["flops"] = s.flops;
    if (s.body)
      j["body"] = toJson(*s.body);
    steps.push_back(j);
  }
  return {{"function", plan.function},  {"buffers", buffers},
          {"steps", steps},             {"arguments", plan.arguments},
          {"results", plan.results},    {"result_names", plan.resultNames},
          {"arena_bytes", plan.arenaBytes}, {"host_bytes", plan.hostBytes}};
}

namespace {
/// An integer field: nlohmann's get<int64_t> would also convert a float,
/// which is undefined behaviour outside int64's range (1e300).
int64_t intOf(const nlohmann::json &j, const char *what) {
  if (!j.is_number_integer() ||
      (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX))
    throw Error(std::string("plan: malformed manifest: ") + what + " " +
                j.dump() + " is not a 64-bit integer");
  return j.get<int64_t>();
}
std::vector<int64_t> intsOf(const nlohmann::json &j, const char *what) {
  if (!j.is_array())
    throw Error(std::string("plan: malformed manifest: ") + what +
                " is not an array");
  std::vector<int64_t> out;
  for (const nlohmann::json &v : j)
    out.push_back(intOf(v, what));
  return out;
}

/// `depth`: 0 for a function's plan, 1 for a fusion body, which holds no
/// fusion of its own (step-fuse never nests them), so a crafted manifest
/// cannot recurse deeper than that.
Plan planFromJsonAt(const nlohmann::json &j, int depth) {
  try {
    Plan plan;
    plan.function = j.at("function").get<std::string>();
    for (const auto &b : j.at("buffers")) {
      BufferDesc d;
      d.name = b.at("name").get<std::string>();
      d.kind = bufferKindFromName(b.at("kind").get<std::string>());
      d.dtype = dtypeFromName(b.at("dtype").get<std::string>());
      d.shape = intsOf(b.at("shape"), "a shape");
      d.offset = intOf(b.at("offset"), "an offset");
      // Optional: "device" when absent (step-offload-optimizer sets it).
      std::string memory = b.value("memory", std::string("device"));
      if (memory != "device" && memory != "host")
        throw Error("plan: buffer '" + d.name + "' has memory '" + memory +
                    "'; expected device or host");
      d.host = memory == "host";
      plan.buffers.push_back(std::move(d));
    }
    for (const auto &s : j.at("steps")) {
      PlanStep step;
      step.op = s.at("op").get<std::string>();
      step.attrs = s.at("attrs");
      step.operands = intsOf(s.at("operands"), "an operand id");
      step.results = intsOf(s.at("results"), "a result id");
      step.kernel = s.value("kernel", std::string());
      step.host = s.value("host", false);
      // Optional: artifacts written before it have no locations.
      step.location = s.value("location", std::string());
      step.flops = s.value("flops", int64_t(0));
      if (step.flops < 0)
        throw Error("plan: step '" + step.op + "' has flops " +
                    std::to_string(step.flops) + "; expected >= 0");
      if (s.contains("body")) {
        if (depth > 0)
          throw Error("plan: malformed manifest: a fusion body holds "
                      "another fusion body");
        step.body = std::make_shared<Plan>(planFromJsonAt(s.at("body"), 1));
      }
      plan.steps.push_back(std::move(step));
    }
    plan.arguments = intsOf(j.at("arguments"), "an argument id");
    plan.results = intsOf(j.at("results"), "a result id");
    plan.resultNames = j.at("result_names").get<std::vector<std::string>>();
    plan.arenaBytes = intOf(j.at("arena_bytes"), "arena_bytes");
    // Artifacts written before step-offload have no host arena.
    plan.hostBytes =
        j.contains("host_bytes") ? intOf(j["host_bytes"], "host_bytes") : 0;
    return plan;
  } catch (const nlohmann::json::exception &e) {
    throw Error(std::string("plan: malformed manifest: ") + e.what());
  }
}
} // namespace

Plan planFromJson(const nlohmann::json &j) { return planFromJsonAt(j, 0); }

namespace {
/// A fusion body takes and gives exactly its step's buffers' types.
void checkBodySignature(const Plan &plan, const PlanStep &step,
                        const std::string &where) {
  const Plan &body = *step.body;
  auto same = [&](const std::vector<int64_t> &outer,
                  const std::vector<int64_t> &inner, const char *what) {
    if (outer.size() != inner.size())
      throw Error("plan: " + where + " has " + std::to_string(outer.size()) +
                  " " + what + "s, its body " + std::to_string(inner.size()));
    for (size_t i = 0; i < outer.size(); ++i) {
      const BufferDesc &a = plan.buffers[outer[i]], &b = body.buffers[inner[i]];
      if (a.dtype != b.dtype || a.shape != b.shape)
        throw Error("plan: " + where + ": " + what + " " + std::to_string(i) +
                    " is " + typeStr(a.dtype, a.shape) + ", in the body " +
                    typeStr(b.dtype, b.shape));
    }
  };
  same(step.operands, body.arguments, "operand");
  same(step.results, body.results, "result");
}
} // namespace

void Plan::validate(bool isBody) const {
  auto n = static_cast<int64_t>(buffers.size());
  auto check = [&](int64_t id, const std::string &where) {
    if (id < 0 || id >= n)
      throw Error("plan: " + where + " names buffer " + std::to_string(id) +
                  ", but the plan has " + std::to_string(n));
  };
  std::vector<bool> defined(buffers.size(), false);
  if (arenaBytes < 0)
    throw Error("plan: negative arena size " + std::to_string(arenaBytes));
  if (hostBytes < 0)
    throw Error("plan: negative host arena size " + std::to_string(hostBytes));
  for (const BufferDesc &b : buffers) {
    // Dims and byte sizes first: everything below (and every backend)
    // computes bytes() without overflow checks.
    int64_t elements = 1;
    for (int64_t d : b.shape) {
      if (d < 0)
        throw Error("plan: buffer '" + b.name + "' has a negative dimension " +
                    "in shape " + shapeToString(b.shape));
      if (d != 0 && elements > INT64_MAX / 8 / d)
        throw Error("plan: buffer '" + b.name + "' of shape " +
                    shapeToString(b.shape) + " has too many elements");
      elements *= d;
    }
    if (isBody) {
      if (b.kind != BufferKind::Transient || b.offset != -1)
        throw Error("plan: buffer '" + b.name + "' of a fusion body must be "
                    "transient with offset -1");
      continue;
    }
    if (b.kind == BufferKind::Transient &&
        (b.offset < 0 || b.offset > arenaBytes - b.bytes()))
      throw Error("plan: transient buffer '" + b.name + "' at offset " +
                  std::to_string(b.offset) + " (" + std::to_string(b.bytes()) +
                  " bytes) is outside the arena of " +
                  std::to_string(arenaBytes) + " bytes");
    if (b.kind == BufferKind::Host &&
        (b.offset < 0 || b.offset > hostBytes - b.bytes()))
      throw Error("plan: host buffer '" + b.name + "' at offset " +
                  std::to_string(b.offset) + " (" + std::to_string(b.bytes()) +
                  " bytes) is outside the host arena of " +
                  std::to_string(hostBytes) + " bytes");
  }
  for (size_t i = 0; i < buffers.size(); ++i)
    defined[i] = buffers[i].kind == BufferKind::Constant;
  for (const BufferDesc &b : buffers)
    if (b.host && b.kind != BufferKind::Param && b.kind != BufferKind::State)
      throw Error("plan: " + std::string(bufferKindName(b.kind)) +
                  " buffer '" + b.name + "' has memory 'host'; only params "
                  "and optimizer state may");
  for (int64_t id : arguments) {
    check(id, "an argument");
    if (buffers[id].kind == BufferKind::Host)
      throw Error("plan: argument buffer '" + buffers[id].name +
                  "' is a host buffer");
    defined[id] = true;
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    const PlanStep &s = steps[k];
    std::string where = "step " + std::to_string(k) + " (" + s.op + ")";
    // Host memory is touched by copies and host steps only: step.offload
    // writes a host buffer, step.reload reads one, a host step reads host
    // memory and constants and writes host buffers.
    bool offload = s.op == "step.offload";
    bool reload = s.op == "step.reload";
    if (s.host && (offload || reload || isCollective(s.op) ||
                   s.op == "step.local_shard"))
      throw Error("plan: " + where + " cannot run on the host (a copy, a "
                  "collective or a rank's shard)");
    for (size_t i = 0; i < s.operands.size(); ++i) {
      int64_t id = s.operands[i];
      check(id, where);
      const BufferDesc &b = buffers[id];
      if (!defined[id])
        throw Error("plan: " + where + " reads buffer '" + b.name +
                    "' before it is written");
      bool inHost = inHostMemory(b);
      if (s.host && !inHost && b.kind != BufferKind::Constant)
        throw Error("plan: host " + where + " reads device buffer '" +
                    b.name + "'; a host step reads host memory only");
      if (inHost && !s.host && !reload)
        throw Error("plan: " + where + " reads host buffer '" + b.name +
                    "'; only step.reload and host steps may");
    }
    for (size_t i = 0; i < s.results.size(); ++i) {
      int64_t id = s.results[i];
      check(id, where);
      defined[id] = true;
      bool host = buffers[id].kind == BufferKind::Host;
      if (host && !offload && !s.host)
        throw Error("plan: " + where + " writes host buffer '" +
                    buffers[id].name + "'; only step.offload and host "
                    "steps may");
      if (!host && s.host)
        throw Error("plan: " + where + " must write host buffer '" +
                    buffers[id].name + "'; a host step writes host "
                    "buffers only");
    }
    if ((offload || reload) &&
        (s.operands.size() != 1 || s.results.size() != 1 ||
         inHostMemory(buffers[s.operands[0]]) != reload ||
         (reload && buffers[s.results[0]].kind != BufferKind::Transient) ||
         (offload && buffers[s.results[0]].kind != BufferKind::Host) ||
         buffers[s.operands[0]].bytes() != buffers[s.results[0]].bytes()))
      throw Error("plan: " + where + " must copy one " +
                  (offload ? "device buffer into a host buffer"
                           : "buffer in host memory into a transient buffer") +
                  " of the same size");
    if ((steps[k].op == "step.fusion") != (steps[k].body != nullptr))
      throw Error("plan: " + where +
                  (steps[k].body ? " has a body but is not a fusion"
                                 : " is a fusion without a body"));
    if (steps[k].body) {
      steps[k].body->validate(/*isBody=*/true);
      checkBodySignature(*this, steps[k], where);
    }
  }
  if (results.size() != resultNames.size())
    throw Error("plan: " + std::to_string(results.size()) + " results but " +
                std::to_string(resultNames.size()) + " result names");
  for (int64_t id : results) {
    check(id, "a result");
    if (!defined[id])
      throw Error("plan: result buffer '" + buffers[id].name +
                  "' is never written");
  }
}

} // namespace step::rt
