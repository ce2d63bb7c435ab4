//===- Nvrtc.h - NVRTC driver and on-disk kernel cache ----------*- C++ -*-===//
//
// Compiles a batch of KernelSources with NVRTC: a cubin per requested
// architecture (default sm_80 and sm_90) and PTX for one virtual
// architecture (default compute_80) that the driver can JIT on newer GPUs.
// No GPU is needed. Jobs (kernel x NVRTC run) run in parallel on
// std::threads, longest source first; identical sources in one batch are
// compiled once. The PTX comes from the run of its real architecture's
// cubin (compute_80's from sm_80's) when that cubin is asked for.
//
// Cache: one file per (source, target) in `cacheDir` (default
// $XDG_CACHE_HOME/stepjit, else ~/.cache/stepjit), named by the SHA-256 of
// a format tag, the NVRTC version (nvrtcVersion), the target, the options
// that change code and the source; written to a temporary file and renamed,
// so readers never see a partial file and concurrent writers are harmless.
//
// A compile error throws rt::Error whose message names a file (under
// <cacheDir>/errors/) holding the source followed by the NVRTC log.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_CODEGEN_NVRTC_H
#define STEP_COMPILER_CODEGEN_NVRTC_H

#include "compiler/codegen/CudaKernels.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace step::codegen {

struct NvrtcOptions {
  /// Real architectures to build a cubin for.
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  /// Virtual architecture of the PTX fallback; empty: no PTX.
  std::string ptxArch = "compute_80";
  /// Empty: rt::defaultCacheDir() (runtime/CacheFiles.h).
  std::string cacheDir;
  /// Compile threads; 0: std::thread::hardware_concurrency().
  unsigned threads = 0;
  /// Where cuda_fp16.h and cuda_bf16.h are; empty: $STEPJIT_CUDA_INCLUDE,
  /// else the toolkit's include dir found when StepJIT was built.
  std::string includeDir;
};

struct CompiledKernel {
  std::string name;
  std::map<std::string, std::string> cubin; ///< arch ("sm_80") -> ELF bytes
  std::string ptx;                          ///< empty when not requested
};

struct CompileStats {
  /// NVRTC runs: one per (kernel, cubin architecture), plus one for the
  /// PTX unless its real architecture is among the cubins'.
  int64_t compiled = 0;
  int64_t cacheHits = 0; ///< runs whose outputs were all in the cache
  double seconds = 0;    ///< wall time of compileKernels
};

/// "major.minor" of the linked NVRTC.
std::string nvrtcVersionString();

/// The cache key (hex SHA-256) of `source` compiled for `target` ("sm_90",
/// "compute_80").
std::string cacheKey(const std::string &source, const std::string &target);

/// Compiles every kernel for every target, in the order given. Throws
/// rt::Error on the first failure (after all jobs stopped).
std::vector<CompiledKernel>
compileKernels(const std::vector<KernelSource> &kernels,
               const NvrtcOptions &options = {},
               CompileStats *stats = nullptr);

} // namespace step::codegen

#endif // STEP_COMPILER_CODEGEN_NVRTC_H
