//===- CacheFiles.cpp - Where StepJIT's caches live -----------------------===//
#include "runtime/CacheFiles.h"

#include "runtime/Tensor.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace step::rt {
namespace fs = std::filesystem;

std::string defaultCacheDir() {
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "stepjit").string();
  if (const char *h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "stepjit").string();
  return (fs::temp_directory_path() / "stepjit").string();
}

void writeFileAtomically(const std::string &path, const std::string &bytes,
                         const std::string &what) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  fs::path p(path), tmp(path);
  tmp += ".tmp" + std::to_string(rng());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(what + ": cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(what + ": cannot rename into " + p.string());
  }
}

} // namespace step::rt
