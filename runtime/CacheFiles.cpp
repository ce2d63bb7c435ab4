//===- CacheFiles.cpp - Where StepJIT's caches live -----------------------===//
#include "runtime/CacheFiles.h"

#include <cstdlib>
#include <filesystem>

namespace step::rt {
namespace fs = std::filesystem;

std::string defaultCacheDir() {
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "stepjit").string();
  if (const char *h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "stepjit").string();
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  return ((ec ? fs::path("/tmp") : tmp) / "stepjit").string();
}

} // namespace step::rt
