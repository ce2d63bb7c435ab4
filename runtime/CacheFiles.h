//===- CacheFiles.h - Where StepJIT's caches live, and how they are written ===//
//
// One cache root for the NVRTC kernel cache (compiler/codegen/Nvrtc.h), the
// JIT's artifacts (compiler/jit/Jit.h) and the CUDA backend's tuned matmul
// algorithms (runtime/cuda/MatmulTuneCache.h), and one way to replace a
// cache file so a reader never sees half of it.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CACHEFILES_H
#define STEP_RUNTIME_CACHEFILES_H

#include <string>

namespace step::rt {

/// $XDG_CACHE_HOME/stepjit, else $HOME/.cache/stepjit, else stepjit in the
/// system's temporary directory.
std::string defaultCacheDir();

/// Writes `bytes` to `path` through a uniquely named temporary in the same
/// directory and a rename (atomic on POSIX file systems): a concurrent
/// reader sees the old file or the new one. Throws rt::Error naming `what`.
void writeFileAtomically(const std::string &path, const std::string &bytes,
                         const std::string &what);

} // namespace step::rt

#endif // STEP_RUNTIME_CACHEFILES_H
