//===- MatmulTuneCache.cpp - Tuned cuBLASLt algorithms kept on disk -------===//
#include "runtime/cuda/MatmulTuneCache.h"

#include "runtime/CacheFiles.h"
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
    : path_(std::move(path)), scope_(std::move(scope)), entries_(read()) {}

std::map<std::string, MatmulTuneCache::Algo> MatmulTuneCache::read() const {
  std::map<std::string, Algo> out;
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    return out; // no cache yet
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("format", "") != kFormat ||
        !j.contains("entries") || !j["entries"].is_object())
      throw std::runtime_error(std::string("not a \"") + kFormat + "\" file");
    for (auto &[k, v] : j["entries"].items()) {
      if (!v.is_array() || v.size() != 8)
        throw std::runtime_error("entry '" + k + "' is not 8 words");
      Algo a{};
      for (size_t i = 0; i < 8; ++i) {
        std::string w = v[i].get<std::string>();
        size_t used = 0;
        a[i] = std::stoull(w, &used, 16);
        if (used != w.size() || w.empty())
          throw std::runtime_error("entry '" + k + "' has a word '" + w +
                                   "' that is not hexadecimal");
      }
      out[k] = a;
    }
  } catch (const std::exception &e) {
    warn(path_ + " ignored: " + e.what());
    out.clear();
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
  std::map<std::string, Algo> all = read();
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
    writeFileAtomically(path_, j.dump(1) + "\n", "matmul tuning cache");
    added_.clear();
  } catch (const std::exception &e) {
    warn(std::string("not saved: ") + e.what());
  }
}

} // namespace step::rt::cuda
