//===- SessionCheckpoint.cpp - Session's params and checkpoints on disk ---===//
//
// Session::load_params / save_params / save_shards (one folder of .npy
// files, or one per rank with a shards.json manifest) and save / load (a
// checkpoint: params, optimizer state and the step count, written through
// runtime/Checkpoint's atomic folder swap).
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"
#include "runtime/SessionUtil.h"

#include "runtime/Npy.h"
#ifdef STEP_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include <filesystem>
#include <fstream>

namespace step {
namespace fs = std::filesystem;
using detail::joined;
using rt::typeStr;
using rt::BufferDesc;
using rt::Error;
using rt::HostTensor;

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

} // namespace step
