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
// A model with symbolic dims (dyn("T", max)) compiles per bucket, on first
// use: each step rounds the batch's valid lengths up by the symbol's
// BucketPolicy (default pow2: 16, 32, ..., max), compiles (or loads) that
// bucket unless the session has it, and runs it; params and optimizer state
// are shared by all buckets. At most `maxBuckets` plans stay in the session
// (a CUDA graph each): one more evicts the least recently used, with a
// warning on stderr, and it reloads from the artifact cache when used again.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_JIT_JIT_H
#define STEP_COMPILER_JIT_JIT_H

#include "compiler/jit/Buckets.h"
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
  /// Symbolic dims: the bucket policy of each symbol; one not named here
  /// gets the default BucketPolicy (pow2).
  std::map<std::string, BucketPolicy> buckets;
  /// Most bucket plans kept at once (LRU beyond; at least 1).
  size_t maxBuckets = 8;
};

/// The artifact of `modelMlir` (a module with @forward) trained with
/// `options`: parse, training pipeline, memory plan, kernels. Throws
/// rt::Error with the compiler's diagnostics on failure.
rt::Artifact compileModel(const std::string &modelMlir,
                          const TrainOptions &options, bool kernels = true,
                          const std::string &kernelCacheDir = "");

/// The artifact of `modelMlir`'s @forward as it is, for evaluation: no
/// backward, no optimizer; canonicalized, fused unless `fuse` is false,
/// memory-planned, with kernels. Its arguments are the model's params and
/// inputs, its results the model's (the loss first), so a Session runs it
/// with params set from a training session (examples/gpt2's validation).
/// Throws rt::Error with the compiler's diagnostics on failure.
rt::Artifact compileForward(const std::string &modelMlir, bool fuse = true,
                            bool kernels = true,
                            const std::string &kernelCacheDir = "");

/// For a model with symbolic dims (`step.symbols`): {"symbols": {S: max},
/// "inputs": {name: ["", "S", ...]}} read off @forward; null otherwise.
/// compileModel records it in the artifact's meta "dynamic", with the
/// bucket's sizes in meta "bucket".
nlohmann::json dynamicSignature(mlir::ModuleOp module);
/// The same, of a model's text; throws rt::Error if it does not parse.
nlohmann::json dynamicSignature(const std::string &modelMlir);

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
  /// Whether the last artifact this Jit needed came from a cache (memory or
  /// disk) rather than a compile; meaningful after the first step.
  bool fromCache() const { return fromCache_; }
  /// The cache key (of the model and options) and the path on disk of the
  /// artifact of the last step (a bucket's has the bucket in its name).
  const std::string &key() const { return key_; }
  std::string artifactPath() const { return artifactPath(bucket_); }
  /// Artifacts this Jit compiled (cache hits not counted) and loaded in all.
  size_t compiles() const { return compiles_; }
  size_t loads() const { return loads_; }
  /// Buckets dropped to stay within maxBuckets (the first drop warns).
  size_t evictions() const { return evictions_; }
  /// The buckets in the session, most recently used first ("T=32").
  std::vector<std::string> buckets() const;

  /// Forgets the artifacts compiled in this process (the disk cache stays).
  static void clearMemoryCache();

private:
  using Sizes = std::map<std::string, int64_t>;
  void ensureTraced();
  /// The session, holding (at least) the bucket of `sizes`.
  void ensureBucket(const Sizes &sizes);
  rt::Artifact loadOrCompile(const Sizes &sizes);
  std::string artifactPath(const Sizes &sizes) const;
  /// The bucket of `batch` under the policies.
  Sizes bucketOf(const std::map<std::string, rt::HostTensor> &batch) const;

  ModelFn model_;
  JitOptions options_;
  std::unique_ptr<Session> session_;
  /// The traced model: text, initial params, symbolic signature (null for
  /// a static model).
  std::string text_;
  std::map<std::string, rt::HostTensor> initial_;
  nlohmann::json dynamic_;
  bool traced_ = false;
  std::string key_;
  /// The last step's bucket; the session's buckets, most recent first.
  Sizes bucket_;
  std::vector<Sizes> lru_;
  bool fromCache_ = false;
  size_t compiles_ = 0, loads_ = 0, evictions_ = 0;
};

inline Jit jit(Jit::ModelFn model, JitOptions options = {}) {
  return Jit(std::move(model), std::move(options));
}

} // namespace step

#endif // STEP_COMPILER_JIT_JIT_H
