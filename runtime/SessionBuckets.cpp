//===- SessionBuckets.cpp - Session's plans, one per bucket ---------------===//
//
// The bucket cache of a model with symbolic dims (docs/dynamic-shapes.md):
// the lengths a batch has, the smallest bucket that holds them (the batch
// zero-padded to it, len.S set), and buckets added or dropped at run time
// (the JIT's LRU cap).
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"
#include "runtime/SessionUtil.h"

#include "runtime/cpu/Kernels.h"
#ifdef STEP_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

namespace step {
using rt::typeStr;
using rt::BufferDesc;
using rt::BufferKind;
using rt::Error;
using rt::HostTensor;

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

} // namespace step
