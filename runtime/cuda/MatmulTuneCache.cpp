//===- MatmulTuneCache.cpp - Tuned cuBLASLt algorithms kept on disk -------===//
#include "runtime/cuda/MatmulTuneCache.h"

#include "runtime/Npy.h"
#include "runtime/Tensor.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace step::rt::cuda {
namespace {

constexpr const char *kFormat = "stepjit-cublaslt-tuned-1";

std::string entryKey(const std::string &scope, const std::string &key) {
  return scope + " | " + key;
}

void warn(const std::string &what) {
  std::fprintf(stderr, "step: matmul tuning cache: %s\n", what.c_str());
}

} // namespace

MatmulTuneCache::MatmulTuneCache(std::string path, std::string scope)
    : path_(std::move(path)), scope_(std::move(scope)) {
  bool foreign = false;
  entries_ = read(&foreign);
}

std::map<std::string, MatmulTuneCache::Algo>
MatmulTuneCache::read(bool *foreign) const {
  std::map<std::string, Algo> out;
  *foreign = false;
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    return out; // no cache yet
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*throws=*/false);
  if (j.is_discarded() || !j.is_object()) {
    warn(path_ + " is not a JSON object: ignored, replaced on save");
    return out;
  }
  if (!j.contains("format") || j["format"] != kFormat ||
      !j.contains("entries") || !j["entries"].is_object()) {
    warn(path_ + " is not a \"" + std::string(kFormat) +
         "\" file: ignored, left as it is");
    *foreign = true;
    return out;
  }
  // A word: exactly 16 lowercase hex digits, as save() writes them.
  auto word = [](const nlohmann::json &w, uint64_t &v) {
    if (!w.is_string())
      return false;
    const std::string &t = w.get_ref<const std::string &>();
    if (t.size() != 16 ||
        t.find_first_not_of("0123456789abcdef") != std::string::npos)
      return false;
    v = std::stoull(t, nullptr, 16);
    return true;
  };
  for (auto &[k, v] : j["entries"].items()) {
    Algo a{};
    bool ok = v.is_array() && v.size() == a.size();
    for (size_t i = 0; ok && i < a.size(); ++i)
      ok = word(v[i], a[i]);
    if (ok)
      out[k] = a;
    else
      warn(path_ + ": entry '" + k + "' is not 8 words of 16 hex digits: "
           "dropped");
  }
  return out;
}

std::optional<MatmulTuneCache::Algo>
MatmulTuneCache::find(const std::string &key) const {
  auto it = entries_.find(entryKey(scope_, key));
  if (it == entries_.end())
    return std::nullopt;
  return it->second;
}

void MatmulTuneCache::put(const std::string &key, const Algo &algo) {
  std::string k = entryKey(scope_, key);
  auto it = entries_.find(k);
  if (it != entries_.end() && it->second == algo)
    return;
  entries_[k] = algo;
  added_[k] = algo;
}

void MatmulTuneCache::save() {
  if (added_.empty())
    return;
  bool foreign = false;
  std::map<std::string, Algo> all = read(&foreign);
  if (foreign) {
    warn("not saved: " + path_ + " belongs to another format");
    return;
  }
  for (auto &[k, a] : added_)
    all[k] = a;
  nlohmann::json entries = nlohmann::json::object();
  for (auto &[k, a] : all) {
    nlohmann::json words = nlohmann::json::array();
    for (uint64_t w : a) {
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx",
                    static_cast<unsigned long long>(w));
      words.push_back(buf);
    }
    entries[k] = std::move(words);
  }
  nlohmann::json j = {{"format", kFormat}, {"entries", std::move(entries)}};
  try {
    std::filesystem::path p(path_);
    if (p.has_parent_path())
      std::filesystem::create_directories(p.parent_path());
    writeFileAtomic(path_, j.dump(1) + "\n", "matmul tuning cache");
    added_.clear();
  } catch (const std::exception &e) {
    warn(std::string("not saved: ") + e.what());
  }
}

} // namespace step::rt::cuda
