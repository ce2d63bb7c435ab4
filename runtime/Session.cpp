//===- Session.cpp - The host API: load an artifact, run steps ------------===//
//
// Backend::Cuda runs the plan with runtime/cuda when the build has the CUDA
// toolkit's headers and the machine a driver and a device; otherwise it is
// refused with the reason rather than falling back silently, so a user who
// asked for the GPU never mistakes CPU timings for GPU ones. Backend::Auto
// takes the GPU when there is one.
//
// Session's params and checkpoints on disk are in SessionCheckpoint.cpp,
// its plans per bucket (symbolic dims) in SessionBuckets.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"
#include "runtime/SessionUtil.h"

#include "runtime/CacheFiles.h"
#include "runtime/FiniteGuard.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/Kernels.h"
#ifdef STEP_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DynamicSymbols.h"
#endif

#include <algorithm>
#include <climits>
#include <cstring>

namespace step {
using detail::joined;
using rt::typeStr;
using rt::BufferDesc;
using rt::BufferKind;
using rt::Error;
using rt::HostTensor;

const char *backendName(Backend b) {
  switch (b) {
  case Backend::Auto: return "auto";
  case Backend::Cpu: return "cpu";
  case Backend::Cuda: return "cuda";
  }
  return "?";
}

Backend backendFromName(const std::string &name) {
  for (Backend b : {Backend::Auto, Backend::Cpu, Backend::Cuda})
    if (name == backendName(b))
      return b;
  throw Error("unknown backend '" + name + "' (expected auto, cpu or cuda)");
}

namespace {
Backend resolveBackend(Backend requested) {
  if (requested == Backend::Cpu)
    return Backend::Cpu;
#ifdef STEP_HAVE_CUDA
  rt::cuda::Availability cuda = rt::cuda::available();
  if (cuda.ok)
    return Backend::Cuda;
  if (requested == Backend::Cuda)
    throw Error("the CUDA backend is not available on this machine (" +
                cuda.reason + "); use --backend=cpu");
#else
  if (requested == Backend::Cuda)
    throw Error("the CUDA backend is not available in this build (no CUDA "
                "device support compiled in); use --backend=cpu");
#endif
  return Backend::Cpu;
}
} // namespace

Session::Session(const std::string &artifactPath, SessionOptions options)
    : backend_(resolveBackend(options.backend)),
      overlapCollectives_(options.overlapCollectives),
      tuneMatmuls_(options.tuneMatmuls),
      tuneCache_(std::move(options.tuneCache)) {
  artifact_ = rt::readArtifact(artifactPath);
  init(options.communicator);
  startBackend(options.backend);
}

Session::Session(rt::Artifact artifact, SessionOptions options)
    : artifact_(std::move(artifact)), backend_(resolveBackend(options.backend)),
      overlapCollectives_(options.overlapCollectives),
      tuneMatmuls_(options.tuneMatmuls),
      tuneCache_(std::move(options.tuneCache)) {
  // What readArtifact checks of an artifact read from a file.
  artifact_.plan.validate();
  std::string defect = rt::metaDefect(artifact_.meta);
  if (!defect.empty())
    throw Error("plan '" + artifact_.plan.function + "': " + defect);
  init(options.communicator);
  startBackend(options.backend);
}

void Session::startBackend(Backend requested) {
#ifdef STEP_HAVE_CUDA
  // Auto keeps the CPU for an artifact built without kernels (stepc
  // --no-kernels); an explicit Cuda request reports what is missing.
  // Auto also keeps a sharded step on the CPU: the CUDA backend's NCCL
  // collectives have not run on GPUs yet (docs/distributed.md); so does a
  // step with host steps (ZeRO-Offload), whose host functions have not
  // either.
  bool hostSteps = false;
  for (const rt::PlanStep &s : artifact_.plan.steps)
    hostSteps = hostSteps || s.host;
  if (backend_ == Backend::Cuda && requested == Backend::Auto &&
      (!rt::cuda::hasDeviceCode(artifact_.plan) ||
       artifact_.meta.contains("shard") || hostSteps))
    backend_ = Backend::Cpu;
  if (backend_ == Backend::Cuda) {
    auto executor =
        std::make_shared<rt::cuda::CudaExecutor>(artifact_, cudaOptions());
    carry(*executor, artifact_.plan);
    cuda_[bucketKey(artifact_)] = std::move(executor);
  }
#else
  (void)requested;
#endif
}

#ifdef STEP_HAVE_CUDA
rt::cuda::CudaExecutorOptions Session::cudaOptions() const {
  rt::cuda::CudaExecutorOptions o;
  o.comm = comm_;
  o.overlapCollectives = overlapCollectives_;
  o.tuneMatmuls = tuneMatmuls_;
  if (tuneMatmuls_ && tuneCache_ != "none")
    o.tuneCache = tuneCache_.empty()
                      ? rt::defaultCacheDir() + "/cublaslt-tuned.json"
                      : tuneCache_;
  return o;
}

void Session::carry(rt::cuda::CudaExecutor &executor, const rt::Plan &plan) {
  // The last result of a param or state's name is its next value, as
  // step() takes it.
  std::map<std::string, size_t> resultOf;
  for (size_t r = 1; r < plan.results.size() && r < plan.resultNames.size();
       ++r)
    resultOf[plan.resultNames[r]] = r;
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < plan.arguments.size(); ++i) {
    const BufferDesc &b = plan.buffers.at(plan.arguments[i]);
    auto it = resultOf.find(b.name);
    if (b.kind != BufferKind::Input && it != resultOf.end())
      pairs.emplace_back(i, it->second);
  }
  executor.setCarried(pairs);
}
#endif

void Session::init(rt::Communicator *communicator) {
  const rt::Plan &plan = artifact_.plan;
  comm_ = &rt::selfCommunicator();
  if (artifact_.meta.contains("shard")) {
    const nlohmann::json &shard = artifact_.meta["shard"];
    comm_ = communicator ? communicator : &rt::worldCommunicator();
    int64_t world = shard.value("world_size", int64_t(0));
    if (world != comm_->size())
      throw Error("the step was compiled for " + std::to_string(world) +
                  " ranks (stepc --world-size), but this run has " +
                  std::to_string(comm_->size()) + " (" + comm_->kind() +
                  "); start it with mpirun -np " + std::to_string(world));
    if (artifact_.meta.contains("dynamic"))
      throw Error("a sharded step with symbolic dims is not supported: "
                  "ranks could pick different buckets");
    nlohmann::json sharded = shard.value("sharded", nlohmann::json::object());
    for (const auto &[name, shape] : sharded.items())
      fullShapes_[name] = shape.get<rt::Shape>();
    tp_ = static_cast<int>(shard.value("tp", int64_t(1)));
    nlohmann::json split = shard.value("tp_split", nlohmann::json::object());
    for (const auto &[name, entry] : split.items())
      tpSplits_[name] = {entry["dim"].get<int64_t>(),
                         entry["groups"].get<int64_t>(),
                         entry["shape"].get<rt::Shape>()};
  } else if (communicator && communicator->size() != 1) {
    throw Error("a communicator of " + std::to_string(communicator->size()) +
                " ranks was given, but the step is not sharded (stepc "
                "--shard)");
  }
  for (size_t i = 0; i < plan.arguments.size(); ++i) {
    const BufferDesc &b = plan.buffers.at(plan.arguments[i]);
    std::vector<std::string> *names = nullptr;
    switch (b.kind) {
    case BufferKind::Param: names = &params_; break;
    case BufferKind::State: names = &state_; break;
    case BufferKind::Input: names = &inputs_; break;
    default:
      throw Error("plan '" + plan.function + "': argument " +
                  std::to_string(i) + " ('" + b.name + "') is a " +
                  rt::bufferKindName(b.kind) +
                  " buffer; step arguments are params, state or inputs");
    }
    if (!argumentIds_.emplace(b.name, plan.arguments[i]).second)
      throw Error("plan '" + plan.function + "': two arguments are named '" +
                  b.name + "'");
    names->push_back(b.name);
    if (b.kind == BufferKind::State)
      values_[b.name] = HostTensor(b.dtype, b.shape);
  }
  // Each tensor-parallel split names a param or state whose buffer is
  // this rank's part of the full shape.
  for (const auto &[name, split] : tpSplits_) {
    auto it = argumentIds_.find(name);
    std::string where = "plan '" + plan.function +
                        "': meta \"shard\" \"tp_split\" names '" + name + "'";
    if (it == argumentIds_.end() ||
        plan.buffers.at(it->second).kind == BufferKind::Input)
      throw Error(where + ", which is not a param or state of the step "
                  "(params: " + joined(params_) + "; state: " +
                  joined(state_) + ")");
    const BufferDesc &b = plan.buffers.at(it->second);
    rt::Shape part = split.full;
    part[static_cast<size_t>(split.dim)] /= tp_;
    if (b.shape != part)
      throw Error(where + ": its full shape " + rt::shapeToString(split.full) +
                  " split " + std::to_string(tp_) + " ways along dim " +
                  std::to_string(split.dim) + " is " +
                  rt::shapeToString(part) + ", but the step's " +
                  rt::bufferKindName(b.kind) + " is " +
                  typeStr(b.dtype, b.shape));
  }
  if (plan.results.empty())
    throw Error("plan '" + plan.function +
                "' has no results; a training step returns its loss first");
  // A result named after a param or state replaces it, so it must fit it.
  for (size_t i = 1; i < plan.results.size() && i < plan.resultNames.size();
       ++i) {
    auto it = argumentIds_.find(plan.resultNames[i]);
    if (it == argumentIds_.end())
      continue;
    const BufferDesc &arg = plan.buffers.at(it->second);
    const BufferDesc &res = plan.buffers.at(plan.results[i]);
    if (arg.kind == BufferKind::Input)
      throw Error("plan '" + plan.function + "': result " + std::to_string(i) +
                  " is named after input '" + arg.name + "'");
    if (arg.dtype != res.dtype || arg.shape != res.shape)
      throw Error("plan '" + plan.function + "': result " + std::to_string(i) +
                  " ('" + arg.name + "') is " + typeStr(res.dtype, res.shape) +
                  " but the " + rt::bufferKindName(arg.kind) + " it replaces is " +
                  typeStr(arg.dtype, arg.shape));
  }
}

const BufferDesc &Session::argumentBuffer(const std::string &name) const {
  auto it = argumentIds_.find(name);
  if (it == argumentIds_.end())
    throw Error("'" + name + "' is not an argument of the step (params: " +
                joined(params_) + "; state: " + joined(state_) +
                "; inputs: " + joined(inputs_) + ")");
  return artifact_.plan.buffers[it->second];
}

namespace {
/// `t` must have buffer `b`'s dtype and shape.
void checkMatches(const std::string &what, const BufferDesc &b,
                  const HostTensor &t) {
  if (t.dtype() != b.dtype || t.shape() != b.shape)
    throw Error(what + ": " + rt::bufferKindName(b.kind) + " '" + b.name +
                "' expects " + typeStr(b.dtype, b.shape) + ", found " +
                typeStr(t.dtype(), t.shape()));
}
} // namespace

void Session::checkMatches(const std::string &what, const std::string &name,
                           const HostTensor &t) const {
  step::checkMatches(what, argumentBuffer(name), t);
}

rt::HostTensor Session::localTensor(const std::string &what,
                                   const std::string &name,
                                   rt::HostTensor t) const {
  auto sharded = fullShapes_.find(name);
  if (sharded != fullShapes_.end() && t.shape() == sharded->second)
    t = rt::shardOf(t, comm_->rank(), comm_->size());
  auto split = tpSplits_.find(name);
  if (split != tpSplits_.end()) {
    const BufferDesc &b = argumentBuffer(name);
    const TpSplit &s = split->second;
    bool full = t.shape() == s.full;
    if (t.dtype() != b.dtype || (!full && t.shape() != b.shape))
      throw Error(what + ": " + rt::bufferKindName(b.kind) + " '" + name +
                  "' expects " + typeStr(b.dtype, s.full) +
                  " (the full tensor, of which this rank keeps its "
                  "tensor-parallel part) or that part, " +
                  typeStr(b.dtype, b.shape) + "; found " +
                  typeStr(t.dtype(), t.shape()));
    if (full)
      t = rt::tpSliceOf(t, s.dim, s.groups, tensorParallelRank(), tp_);
  }
  checkMatches(what, name, t);
  return t;
}

void Session::requireParamValues(const std::string &what) const {
  for (const std::string &name : params_)
    if (!values_.count(name))
      throw Error(what + ": param '" + name +
                  "' has no value (call load_params or set first)");
}

#ifdef STEP_HAVE_CUDA
bool Session::handOver(const std::shared_ptr<rt::cuda::CudaExecutor> &to,
                       const rt::Plan &plan) {
  if (!holder_ || onDevice_.empty())
    return false;
  // Buckets share the session's arguments in one order (addBucket), so an
  // argument's index is the same in both plans.
  std::vector<std::pair<size_t, size_t>> pairs;
  std::set<std::string> taken;
  for (const auto &[arg, result] : to->carried()) {
    const std::string &name = plan.buffers.at(plan.arguments[arg]).name;
    if (!onDevice_.count(name))
      return false;
    pairs.emplace_back(arg, arg);
    taken.insert(name);
  }
  for (std::string name : std::set<std::string>(onDevice_))
    if (!taken.count(name))
      syncFromDevice(name);
  // Throwing, holder_ still has them all.
  to->adoptCarried(*holder_, pairs);
  holder_->invalidateCarried();
  holder_ = to;
  return true;
}
#endif

void Session::requireDeviceWhole(const std::string &what) const {
  if (deviceLost_)
    throw Error(what + ": a step that failed had updated some params and "
                       "state in place on the device (donated updates, "
                       "docs/artifact.md); load_params or load them again");
}

void Session::syncFromDevice() const {
  while (!onDevice_.empty()) {
    std::string name = *onDevice_.begin(); // erased by the call
    syncFromDevice(name);
  }
}

void Session::syncFromDevice(const std::string &name) const {
  if (!onDevice_.count(name))
    return;
  requireDeviceWhole("'" + name + "'");
#ifdef STEP_HAVE_CUDA
  const rt::Plan &plan = artifact_.plan;
  // Every bucket has the session's arguments (addBucket).
  int64_t id = argumentIds_.at(name);
  auto arg = static_cast<size_t>(
      std::find(plan.arguments.begin(), plan.arguments.end(), id) -
      plan.arguments.begin());
  holder_->fetchArgument(arg, values_.at(name));
#endif
  onDevice_.erase(name);
}

void Session::replaceValues(std::map<std::string, HostTensor> values) {
  // After a failed in-place step, new values for everything on the device
  // make the session whole again; anything less throws below.
  if (deviceLost_ &&
      std::all_of(onDevice_.begin(), onDevice_.end(),
                  [&](const std::string &n) { return values.count(n) > 0; }))
    deviceLost_ = false;
  for (std::string name : std::set<std::string>(onDevice_))
    if (!values.count(name))
      syncFromDevice(name);
  for (auto &[name, t] : values) {
    values_[name] = std::move(t);
    onDevice_.erase(name);
  }
#ifdef STEP_HAVE_CUDA
  for (auto &[key, executor] : cuda_)
    executor->invalidateCarried();
#endif
  holder_.reset();
}

std::vector<std::string> Session::inputNames() const {
  if (!artifact_.meta.contains("dynamic"))
    return inputs_;
  const nlohmann::json &symbols = artifact_.meta["dynamic"]["symbols"];
  std::vector<std::string> names;
  for (const std::string &name : inputs_)
    if (name.rfind("len.", 0) != 0 || !symbols.contains(name.substr(4)))
      names.push_back(name);
  return names;
}

double Session::step(const std::map<std::string, HostTensor> &batch) {
  return step(batch, nullptr);
}

double Session::step(const std::map<std::string, HostTensor> &rawBatch,
                     rt::RunTimeline *timeline) {
  std::map<std::string, HostTensor> paddedBatch;
  size_t b = 0;
  bool bucketed = artifact_.meta.contains("dynamic");
  if (bucketed)
    b = pickBucket(rawBatch, paddedBatch);
  const auto &batch = bucketed ? paddedBatch : rawBatch;
  const rt::Artifact &art = bucket(b);
  const rt::Plan &plan = art.plan;
  for (const auto &[name, t] : batch) {
    auto it = argumentIds_.find(name);
    if (it == argumentIds_.end() ||
        plan.buffers[it->second].kind != BufferKind::Input)
      throw Error("step: the batch has '" + name +
                  "', which is not an input of the step (inputs: " +
                  joined(inputs_) + ")");
  }
  std::vector<const HostTensor *> args;
  for (int64_t id : plan.arguments) {
    const BufferDesc &b = plan.buffers[id];
    if (b.kind == BufferKind::Input) {
      auto it = batch.find(b.name);
      if (it == batch.end())
        throw Error("step: the batch has no input '" + b.name + "' (inputs: " +
                    joined(inputs_) + ")");
      // The bucket's own buffer: its padded shape.
      step::checkMatches("step", b, it->second);
      args.push_back(&it->second);
      continue;
    }
    auto it = values_.find(b.name);
    if (it == values_.end())
      throw Error("step: param '" + b.name +
                  "' has no value (call load_params or set first)");
    args.push_back(&it->second);
  }

  std::vector<HostTensor> results;
#ifdef STEP_HAVE_CUDA
  std::shared_ptr<rt::cuda::CudaExecutor> executor;
  if (backend_ == Backend::Cuda) {
    std::shared_ptr<rt::cuda::CudaExecutor> &slot = cuda_[bucketKey(art)];
    if (!slot) {
      slot = std::make_shared<rt::cuda::CudaExecutor>(art, cudaOptions());
      carry(*slot, plan);
    }
    executor = slot;
    requireDeviceWhole("step");
    // The params and state on the device (if any) are another bucket's
    // executor's: copied over on the device, else they come back to the
    // host, from where this one uploads them.
    if (executor != holder_ && !handOver(executor, plan)) {
      syncFromDevice();
      if (holder_)
        holder_->invalidateCarried();
      holder_.reset();
    }
    // Donated updates write the params and state during the run: until the
    // commit below, a failure leaves them neither the old values nor the
    // new ones.
    deviceLost_ = executor->updatesInPlace();
    results = executor->run(args, timeline);
  } else
#endif
  {
    rt::CommScope scope(*comm_);
    rt::cpu::ExecuteOptions options;
    options.overlapCollectives = overlapCollectives_;
    options.timeline = timeline;
    results = rt::cpu::execute(art, args, options);
  }
  bucketsUsed_.insert(bucketKey(art));

  const HostTensor &loss = results[0];
  if (loss.numel() != 1)
    throw Error("step: result 0 (the loss) has shape " +
                rt::shapeToString(loss.shape()) + "; expected one element");
  double value = loss.getAsDouble(0);
  // stepc --guard-finite: a NaN/Inf in the loss or a gradient commits
  // nothing; the CPU re-run names the op it came from.
  if (rt::guardTripped(art, results)) {
    // Uncommitted, the device's argument buffers still hold what the step
    // read: the CPU re-run reads them through `args` (into values_).
    syncFromDevice();
    rt::CommScope scope(*comm_);
    rt::throwNonFinite(art, args, backendName(backend_));
  }
  // The carried results (on the GPU) become the next step's arguments
  // there; run() returned none of them.
  std::vector<bool> carried(results.size(), false);
#ifdef STEP_HAVE_CUDA
  if (executor) {
    executor->commitCarried();
    deviceLost_ = false;
    for (const auto &[arg, result] : executor->carried())
      carried[result] = true;
  }
#endif
  // Nothing below throws: commit.
  std::map<std::string, HostTensor> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    if (carried[i])
      continue;
    std::string name = i < plan.resultNames.size() && !plan.resultNames[i].empty()
                           ? plan.resultNames[i]
                           : "result" + std::to_string(i);
    auto it = values_.find(name);
    if (i > 0 && it != values_.end())
      it->second = std::move(results[i]);
    else
      outputs[name] = std::move(results[i]);
  }
  outputs_ = std::move(outputs);
#ifdef STEP_HAVE_CUDA
  if (executor) {
    holder_ = executor;
    for (const auto &[arg, result] : executor->carried())
      onDevice_.insert(plan.buffers[plan.arguments[arg]].name);
  }
#endif
  ++stepsDone_;
  return value;
}

Session::DeviceMemoryUse Session::deviceMemory() const {
  DeviceMemoryUse use;
#ifdef STEP_HAVE_CUDA
  const rt::cuda::CudaExecutor *e = holder_.get();
  if (!e && !cuda_.empty())
    e = cuda_.begin()->second.get();
  if (e) {
    rt::cuda::DeviceMemory m = e->memory();
    use = {m.arenaBytes, m.allocatedBytes, m.measuredBytes, m.totalBytes};
  }
#endif
  return use;
}

const HostTensor &Session::get(const std::string &name) const {
  syncFromDevice(name);
  if (auto it = values_.find(name); it != values_.end())
    return it->second;
  if (auto it = outputs_.find(name); it != outputs_.end())
    return it->second;
  if (argumentIds_.count(name))
    throw Error("get: '" + name + "' has no value yet");
  throw Error("get: no param, state or result named '" + name +
              "' (params: " + joined(params_) + "; state: " + joined(state_) +
              ")");
}

HostTensor Session::gathered(const std::string &name) const {
  const HostTensor &block = get(name);
  if (auto split = tpSplits_.find(name); split != tpSplits_.end()) {
    // Every rank's part (all of one size) over the whole world; the data-
    // parallel replicas hold the same parts, so ranks 0..T-1 make it whole.
    auto bytes = static_cast<int64_t>(block.byteSize());
    std::vector<uint8_t> all(block.byteSize() *
                             static_cast<size_t>(comm_->size()));
    comm_->allGather(block.raw(), all.data(), bytes);
    std::vector<HostTensor> parts;
    for (int t = 0; t < tp_; ++t) {
      HostTensor part(block.dtype(), block.shape());
      if (bytes)
        std::memcpy(part.raw(), all.data() + static_cast<size_t>(t) * bytes,
                    static_cast<size_t>(bytes));
      parts.push_back(std::move(part));
    }
    return rt::tpUnslice(parts, split->second.dim, split->second.groups);
  }
  auto it = fullShapes_.find(name);
  if (it == fullShapes_.end())
    return block;
  // The blocks in rank order are the flat tensor and its padding.
  HostTensor all(block.dtype(), {block.numel() * comm_->size()});
  comm_->allGather(block.raw(), all.raw(),
                   static_cast<int64_t>(block.byteSize()));
  HostTensor flat =
      rt::cpu::slice(all, {0}, {rt::numElements(it->second)}, {1});
  return rt::cpu::reshape(flat, it->second);
}

void Session::set(const std::string &name, HostTensor t) {
  const BufferDesc &b = argumentBuffer(name);
  if (b.kind == BufferKind::Input)
    throw Error("set: '" + name +
                "' is an input; pass it to step() in the batch");
  std::map<std::string, HostTensor> value;
  value[name] = localTensor("set", name, std::move(t));
  replaceValues(std::move(value));
}

} // namespace step
