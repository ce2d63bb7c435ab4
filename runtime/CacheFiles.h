//===- CacheFiles.h - Where StepJIT's caches live --------------*- C++ -*-===//
//
// One cache root for the NVRTC kernel cache (compiler/codegen/Nvrtc.h), the
// JIT's artifacts (compiler/jit/Jit.h) and the CUDA backend's tuned matmul
// algorithms (runtime/cuda/MatmulTuneCache.h). Their files are replaced
// with rt::writeFileAtomic (runtime/Npy.h).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CACHEFILES_H
#define STEP_RUNTIME_CACHEFILES_H

#include <string>

namespace step::rt {

/// $XDG_CACHE_HOME/stepjit, else $HOME/.cache/stepjit, else stepjit in the
/// system's temporary directory (/tmp when even that is unknown). Never
/// throws: a cache's location never fails a run.
std::string defaultCacheDir();

} // namespace step::rt

#endif // STEP_RUNTIME_CACHEFILES_H
