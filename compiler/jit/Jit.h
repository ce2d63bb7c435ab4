//===- Jit.h - Just-in-time training steps in the host program --*- C++ -*-===//
//
//   step::Jit net = step::jit([&](trace::Graph &g) { ...trace the model... },
//                             options);
//   double loss = net.step(batch);   // first call: trace, compile, run
//
// The first step() traces the model into a Graph, then looks for a compiled
// artifact under the cache key (FNV-1a 64 of the traced model's text, the
// training options and the compiler's format tag): first in this process,
// then on disk ($XDG_CACHE_HOME/stepjit/artifacts/<key>.step, else
// ~/.cache/stepjit/...). On a miss it compiles (the training pipeline,
// step-memory-plan, and the CUDA kernels when StepJIT was built with the
// CUDA toolkit) and stores the artifact atomically; a second process with
// the same model and options therefore starts without recompiling. The step
// then runs through the runtime (step::Session: CUDA when a device is
// present, else the CPU backend). Params start from the traced initializers.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_JIT_JIT_H
#define STEP_COMPILER_JIT_JIT_H

#include "compiler/pipeline/Train.h"
#include "compiler/trace/Trace.h"
#include "runtime/Session.h"

#include <functional>
#include <memory>

namespace step {

struct JitOptions {
  TrainOptions train;
  SessionOptions session;
  /// Seed of the traced params' initializers (Graph's seed).
  uint64_t seed = 0;
  /// Artifact and kernel cache root; empty: $XDG_CACHE_HOME/stepjit or
  /// ~/.cache/stepjit.
  std::string cacheDir;
  /// Compile CUDA kernels into the artifact (when built with the toolkit).
  bool kernels = true;
};

/// The artifact of `modelMlir` (a module with @forward) trained with
/// `options`: parse, training pipeline, memory plan, kernels. Throws
/// rt::Error with the compiler's diagnostics on failure.
rt::Artifact compileModel(const std::string &modelMlir,
                          const TrainOptions &options, bool kernels = true,
                          const std::string &kernelCacheDir = "");

/// For a model with symbolic dims (`step.symbols`): {"symbols": {S: max},
/// "inputs": {name: ["", "S", ...]}} read off @forward; null otherwise.
/// compileModel records it in the artifact's meta "dynamic", with the
/// bucket's sizes in meta "bucket".
nlohmann::json dynamicSignature(mlir::ModuleOp module);

/// One artifact holding the model compiled for each bucket of `sizes`
/// (symbol -> size; a symbol left out is padded to its maximum): the
/// largest bucket is the artifact, the others are its `buckets`
/// (docs/dynamic-shapes.md). Params and optimizer state are the same
/// tensors in every bucket; step::Session picks the bucket per batch.
rt::Artifact compileBuckets(const std::string &modelMlir,
                            const TrainOptions &options,
                            std::vector<std::map<std::string, int64_t>> sizes,
                            bool kernels = true,
                            const std::string &kernelCacheDir = "");

class Jit {
public:
  using ModelFn = std::function<void(trace::Graph &)>;
  Jit(ModelFn model, JitOptions options);
  ~Jit();
  Jit(Jit &&) noexcept;

  /// One training step; the first call traces and compiles (or loads).
  double step(const std::map<std::string, rt::HostTensor> &batch);

  /// The session (traces and compiles first if needed).
  Session &session();
  /// Whether the artifact came from a cache (memory or disk) rather than a
  /// compile; meaningful after the first step.
  bool fromCache() const { return fromCache_; }
  /// The cache key and the artifact's path on disk.
  const std::string &key() const { return key_; }
  std::string artifactPath() const;

  /// Forgets the artifacts compiled in this process (the disk cache stays).
  static void clearMemoryCache();

private:
  void ensureCompiled();

  ModelFn model_;
  JitOptions options_;
  std::unique_ptr<Session> session_;
  std::string key_;
  bool fromCache_ = false;
};

inline Jit jit(Jit::ModelFn model, JitOptions options = {}) {
  return Jit(std::move(model), std::move(options));
}

} // namespace step

#endif // STEP_COMPILER_JIT_JIT_H
