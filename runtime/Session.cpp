//===- Session.cpp - The host API: load an artifact, run steps ------------===//
//
// Backend::Cuda runs the plan with runtime/cuda when the build has the CUDA
// toolkit's headers and the machine a driver and a device; otherwise it is
// refused with the reason rather than falling back silently, so a user who
// asked for the GPU never mistakes CPU timings for GPU ones. Backend::Auto
// takes the GPU when there is one.
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"

#include "runtime/FiniteGuard.h"
#include "runtime/Npy.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/Kernels.h"
#ifdef STEP_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DynamicSymbols.h"
#endif

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace step {
namespace fs = std::filesystem;
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
std::string typeStr(rt::DType t, const rt::Shape &s) {
  return std::string(rt::dtypeName(t)) + " " + rt::shapeToString(s);
}

std::string joined(const std::vector<std::string> &names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

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
      overlapCollectives_(options.overlapCollectives) {
  artifact_ = rt::readArtifact(artifactPath);
  init(options.communicator);
  startBackend(options.backend);
}

Session::Session(rt::Artifact artifact, SessionOptions options)
    : artifact_(std::move(artifact)),
      backend_(resolveBackend(options.backend)),
      overlapCollectives_(options.overlapCollectives) {
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

namespace {
/// A per-rank checkpoint's manifest (Session::save_shards), or null.
nlohmann::json shardManifest(const std::string &dir) {
  fs::path path = fs::path(dir) / "shards.json";
  if (!fs::exists(path))
    return nullptr;
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
    if (j.at("world_size").get<int64_t>() < 1 || !j.at("sharded").is_object())
      throw Error("world_size < 1");
  } catch (const std::exception &e) {
    throw Error("load_params: " + path.string() +
                " is not a shard manifest (world_size, sharded): " + e.what());
  }
  return j;
}

/// The full tensor `name` of a per-rank checkpoint: its blocks in
/// DIR/rank<R>/<name>.npy for every rank R of the world that wrote it.
HostTensor unshardFiles(const std::string &dir, const std::string &name,
                        const nlohmann::json &manifest) {
  int64_t world = manifest["world_size"].get<int64_t>();
  std::vector<HostTensor> blocks;
  for (int64_t r = 0; r < world; ++r)
    blocks.push_back(rt::readNpy(
        (fs::path(dir) / ("rank" + std::to_string(r)) / (name + ".npy"))
            .string()));
  try {
    return rt::unshard(blocks, manifest["sharded"][name].get<rt::Shape>());
  } catch (const Error &e) {
    throw Error("load_params: '" + name + "' in " + dir + ": " + e.what());
  }
}
} // namespace

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

void Session::syncFromDevice() const {
  while (!onDevice_.empty()) {
    std::string name = *onDevice_.begin(); // erased by the call
    syncFromDevice(name);
  }
}

void Session::syncFromDevice(const std::string &name) const {
  if (!onDevice_.count(name))
    return;
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

void Session::load_params(const std::string &dir) {
  if (!fs::is_directory(dir))
    throw Error("load_params: '" + dir + "' is not a folder");
  nlohmann::json manifest = shardManifest(dir);
  std::map<std::string, HostTensor> loaded;
  auto load = [&](const std::string &name, bool required) {
    std::string path = (fs::path(dir) / (name + ".npy")).string();
    if (!manifest.is_null() && manifest["sharded"].contains(name)) {
      loaded[name] = localTensor("load_params: " + dir + " (rank files)",
                                 name, unshardFiles(dir, name, manifest));
      return;
    }
    if (!fs::exists(path)) {
      if (required)
        throw Error("load_params: missing param '" + name + "': " + path +
                    " does not exist");
      const BufferDesc &b = argumentBuffer(name);
      loaded[name] = HostTensor(b.dtype, b.shape);
      return;
    }
    loaded[name] =
        localTensor("load_params: " + path, name, rt::readNpy(path));
  };
  for (const std::string &name : params_)
    load(name, true);
  for (const std::string &name : state_)
    load(name, false);
  replaceValues(std::move(loaded));
}

namespace {
/// fs::create_directories with the failure said as an Error.
void makeFolder(const fs::path &dir, const std::string &what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(what + ": cannot create folder " + dir.string() + ": " +
                ec.message());
}
} // namespace

void Session::save_params(const std::string &dir) const {
  requireParamValues("save_params");
  syncFromDevice();
  bool writer = comm_->rank() == 0;
  if (writer)
    makeFolder(dir, "save_params");
  auto save = [&](const std::string &name) {
    HostTensor t = gathered(name); // collective when sharded
    if (!writer)
      return;
    fs::path path = fs::path(dir) / (name + ".npy");
    // Names like "layer0/w" become subfolders.
    makeFolder(path.parent_path(), "save_params");
    rt::writeNpy(path.string(), t);
  };
  for (const std::string &name : params_)
    save(name);
  for (const std::string &name : state_)
    save(name);
}

void Session::save_shards(const std::string &dir) const {
  requireParamValues("save_shards");
  syncFromDevice();
  int r = comm_->rank();
  // An older manifest goes first: until the new one is written the folder
  // is no checkpoint, rather than a mix of old and new blocks.
  if (r == 0)
    fs::remove(fs::path(dir) / "shards.json");
  comm_->barrier();
  fs::path mine = fs::path(dir) / ("rank" + std::to_string(r));
  makeFolder(mine, "save_shards");
  nlohmann::json sharded = nlohmann::json::object();
  auto save = [&](const std::string &name) {
    bool blocks = fullShapes_.count(name) != 0;
    if (blocks)
      sharded[name] = fullShapes_.at(name);
    // A tensor-parallel part is written whole, as an unsharded tensor:
    // gathered on every rank (collective), written by rank 0.
    bool split = tpSplits_.count(name) != 0;
    HostTensor full;
    if (split)
      full = gathered(name);
    if (!blocks && r != 0)
      return;
    fs::path path = (blocks ? mine : fs::path(dir)) / (name + ".npy");
    makeFolder(path.parent_path(), "save_shards");
    rt::writeNpy(path.string(), split ? full : values_.at(name));
  };
  for (const std::string &name : params_)
    save(name);
  for (const std::string &name : state_)
    save(name);
  // The manifest last, once every rank's files are complete.
  comm_->barrier();
  if (r == 0)
    rt::writeFileAtomic((fs::path(dir) / "shards.json").string(),
                        nlohmann::json({{"world_size", comm_->size()},
                                        {"sharded", sharded}})
                                .dump(2) +
                            "\n",
                        "save_shards");
}

void Session::save(const std::string &dir, const nlohmann::json &data) const {
  requireParamValues("save");
  syncFromDevice();
  rt::Checkpoint c;
  c.step = stepsDone_;
  c.data = data;
  c.writer = {{"function", artifact_.plan.function},
              {"source_hash", artifact_.meta.value("source_hash", "")},
              {"world_size", comm_->size()}};
  for (const std::vector<std::string> *names : {&params_, &state_})
    for (const std::string &name : *names)
      c.tensors[name] = gathered(name); // collective when sharded
  // Rank 0 writes; the others learn whether it could, so that every rank
  // returns (or throws) with the checkpoint complete (or not written).
  std::string failure;
  if (comm_->rank() == 0) {
    try {
      rt::writeCheckpoint(dir, c);
    } catch (const std::exception &e) { // every rank must hear of it
      failure = e.what();
    }
  }
  if (comm_->size() > 1) {
    int32_t failed = !failure.empty();
    comm_->broadcast(&failed, sizeof failed, 0);
    if (failed && failure.empty())
      failure = "checkpoint " + dir + ": rank 0 could not write it";
  }
  if (!failure.empty())
    throw Error("save: " + failure);
}

rt::Checkpoint Session::load(const std::string &dir) {
  rt::Checkpoint c = rt::readCheckpoint(dir);
  std::map<std::string, HostTensor> loaded;
  for (const std::vector<std::string> *names : {&params_, &state_})
    for (const std::string &name : *names) {
      auto it = c.tensors.find(name);
      if (it == c.tensors.end())
        throw Error("load: checkpoint " + dir + " has no tensor '" + name +
                    "', which this step " + "needs (written for another "
                    "model or optimizer?)");
      loaded[name] =
          localTensor("load: checkpoint " + dir, name, std::move(it->second));
      c.tensors.erase(it);
    }
  if (!c.tensors.empty()) {
    std::vector<std::string> extra;
    for (const auto &entry : c.tensors)
      extra.push_back(entry.first);
    throw Error("load: checkpoint " + dir + " holds tensors this step does "
                "not have: " + joined(extra) +
                " (written for another model or optimizer?)");
  }
  replaceValues(std::move(loaded));
  stepsDone_ = c.step;
  return c;
}

std::map<std::string, int64_t>
Session::lengthsOf(const nlohmann::json &dynamic,
                   const std::map<std::string, HostTensor> &batch) {
  std::map<std::string, int64_t> lengths;
  for (const auto &[name, dims] : dynamic["inputs"].items()) {
    auto it = batch.find(name);
    if (it == batch.end())
      continue; // reported with the other missing inputs
    const rt::Shape &shape = it->second.shape();
    if (shape.size() != dims.size())
      throw Error("step: input '" + name + "' has rank " +
                  std::to_string(shape.size()) + ", expected " +
                  std::to_string(dims.size()));
    for (size_t d = 0; d < dims.size(); ++d) {
      std::string symbol = dims[d].get<std::string>();
      if (symbol.empty())
        continue;
      auto [at, fresh] = lengths.emplace(symbol, shape[d]);
      if (!fresh && at->second != shape[d])
        throw Error("step: input '" + name + "' has " + symbol + " = " +
                    std::to_string(shape[d]) + " but another input has " +
                    std::to_string(at->second));
      int64_t max = dynamic["symbols"][symbol].get<int64_t>();
      if (shape[d] < 1 || shape[d] > max)
        throw Error("step: input '" + name + "' has " + symbol + " = " +
                    std::to_string(shape[d]) + ", expected 1.." +
                    std::to_string(max));
    }
  }
  return lengths;
}

std::string Session::bucketKey(const rt::Artifact &a) {
  return a.meta.value("bucket", nlohmann::json::object()).dump();
}

namespace {
nlohmann::json sizesJson(const std::map<std::string, int64_t> &sizes) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto &[symbol, size] : sizes)
    j[symbol] = size;
  return j;
}
} // namespace

bool Session::hasBucket(const std::map<std::string, int64_t> &sizes) const {
  std::string key = sizesJson(sizes).dump();
  for (size_t i = 0; i < bucketCount(); ++i)
    if (bucketKey(bucket(i)) == key)
      return true;
  return false;
}

void Session::addBucket(rt::Artifact b) {
  b.plan.validate();
  const char *what = "addBucket: ";
  if (!artifact_.meta.contains("dynamic") ||
      b.meta.value("dynamic", nlohmann::json()) != artifact_.meta["dynamic"])
    throw Error(std::string(what) + "the bucket's symbolic signature " +
                b.meta.value("dynamic", nlohmann::json()).dump() +
                " differs from the session's " +
                artifact_.meta.value("dynamic", nlohmann::json()).dump());
  for (size_t i = 0; i < bucketCount(); ++i)
    if (bucketKey(bucket(i)) == bucketKey(b))
      throw Error(std::string(what) + "the session has bucket " +
                  bucketKey(b) + " already");
  const rt::Plan &mine = artifact_.plan;
  if (b.plan.arguments != mine.arguments)
    throw Error(std::string(what) + "the bucket's arguments are not the "
                                    "session's (another model?)");
  for (int64_t id : mine.arguments) {
    const BufferDesc &x = mine.buffers.at(id), &y = b.plan.buffers.at(id);
    bool same = x.name == y.name && x.kind == y.kind &&
                (x.kind == BufferKind::Input ||
                 (x.dtype == y.dtype && x.shape == y.shape));
    if (!same)
      throw Error(std::string(what) + "argument '" + x.name + "' (" +
                  typeStr(x.dtype, x.shape) + ") is '" + y.name + "' (" +
                  typeStr(y.dtype, y.shape) + ") in the bucket");
  }
  artifact_.buckets.push_back(std::move(b));
}

bool Session::dropBucket(const std::map<std::string, int64_t> &sizes) {
  std::string key = sizesJson(sizes).dump();
  if (bucketCount() < 2)
    return false;
  size_t i = 0;
  while (i < bucketCount() && bucketKey(bucket(i)) != key)
    ++i;
  if (i == bucketCount())
    return false;
  if (auto it = cuda_.find(key); it != cuda_.end() && it->second == holder_) {
    syncFromDevice(); // the params and state go with its device memory
    holder_.reset();
  }
  cuda_.erase(key);
  if (i > 0) {
    artifact_.buckets.erase(artifact_.buckets.begin() + (i - 1));
    return true;
  }
  // The session's own plan goes: its first nested bucket takes its place
  // (same arguments, so argumentIds_ and the values stay valid).
  std::vector<rt::Artifact> rest = std::move(artifact_.buckets);
  artifact_ = std::move(rest.front());
  rest.erase(rest.begin());
  artifact_.buckets = std::move(rest);
  return true;
}

size_t Session::pickBucket(const std::map<std::string, HostTensor> &batch,
                           std::map<std::string, HostTensor> &padded) const {
  const nlohmann::json &dynamic = artifact_.meta["dynamic"];
  std::map<std::string, int64_t> lengths = lengthsOf(dynamic, batch);
  // The smallest bucket (by total size) that holds every length.
  size_t best = 0;
  int64_t bestSize = INT64_MAX;
  for (size_t i = 0; i < bucketCount(); ++i) {
    const nlohmann::json &sizes = bucket(i).meta["bucket"];
    int64_t total = 1;
    bool fits = true;
    for (const auto &[symbol, len] : lengths) {
      fits = fits && sizes[symbol].get<int64_t>() >= len;
      total *= sizes[symbol].get<int64_t>();
    }
    if (fits && total < bestSize) {
      best = i;
      bestSize = total;
    }
  }
  if (bestSize == INT64_MAX) {
    std::string have, need;
    for (size_t i = 0; i < bucketCount(); ++i)
      have += (i ? ", " : "") + bucket(i).meta["bucket"].dump();
    for (const auto &[symbol, len] : lengths)
      need += (need.empty() ? "" : ", ") + symbol + " = " +
              std::to_string(len);
    throw Error("step: no bucket holds " + need + " (buckets: " + have +
                "); compile a larger one (stepc --buckets)");
  }
  // Inputs zero-padded along their symbolic dims; len.S added.
  const nlohmann::json &sizes = bucket(best).meta["bucket"];
  padded = batch;
  for (const auto &[name, dims] : dynamic["inputs"].items()) {
    auto it = padded.find(name);
    if (it == padded.end())
      continue;
    std::vector<int64_t> low(dims.size(), 0), high(dims.size(), 0);
    for (size_t d = 0; d < dims.size(); ++d)
      if (!dims[d].get<std::string>().empty())
        high[d] = sizes[dims[d].get<std::string>()].get<int64_t>() -
                  it->second.shape()[d];
    it->second = rt::cpu::pad(it->second, low, high, 0.0);
  }
  for (const auto &[symbol, len] : lengths) {
    HostTensor n(rt::DType::I64, {});
    n.data<int64_t>()[0] = len;
    padded["len." + symbol] = n;
  }
  return best;
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
    // The params and state on the device (if any) are another bucket's
    // executor's: copied over on the device, else they come back to the
    // host, from where this one uploads them.
    if (executor != holder_ && !handOver(executor, plan)) {
      syncFromDevice();
      if (holder_)
        holder_->invalidateCarried();
      holder_.reset();
    }
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
