//===- MatmulTuneCache.h - Tuned cuBLASLt algorithms kept on disk -*- C++ -*-===//
//
// step-run --tune-matmuls times cuBLASLt's candidate algorithms of each
// matmul shape and keeps the fastest (CudaMatmul.cpp). This file keeps
// those picks across processes, as XLA's autotuning cache does: a later
// run on the same device and cuBLASLt takes them without timing again, and
// so computes the same bits as the run that picked them. cuBLASLt's
// algorithm struct is plain data, valid with the library version and
// device it came from: entries are scoped by both. Pure C++ (no CUDA
// header), built into step_runtime on every machine and unit-tested there.
//
// File: JSON {"format": "stepjit-cublaslt-tuned-1", "entries": {"<scope> |
// <shape key>": [8 words of 16 hex digits]}}. A missing file is an empty
// cache; a broken entry is dropped and a broken or foreign file ignored,
// with a warning: a cache never fails a run. save() merges with what is
// on disk then (another process's picks stay; two saving at once may
// lose one's, which are timed again next time), replaces the file
// atomically (rt::writeFileAtomic) and leaves a file of another format
// alone.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CUDA_MATMULTUNECACHE_H
#define STEP_RUNTIME_CUDA_MATMULTUNECACHE_H

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace step::rt::cuda {

class MatmulTuneCache {
public:
  /// cublasLtMatmulAlgo_t's bytes.
  using Algo = std::array<uint64_t, 8>;

  /// Reads `path`; `scope` names the device and the cuBLASLt version
  /// (entries of other scopes are kept on save, never found).
  MatmulTuneCache(std::string path, std::string scope);

  const std::string &path() const { return path_; }
  std::optional<Algo> find(const std::string &key) const;
  void put(const std::string &key, const Algo &algo);
  /// Writes the file when put() added or changed an entry: the file's
  /// entries now, this cache's over them. Failures are warnings on stderr.
  void save();

private:
  /// Entries of `path_` (all scopes); an entry that is not 8 words of 16
  /// hex digits is dropped, a file that is not JSON ignored (replaced on
  /// save), a JSON file of another format ignored and set `*foreign` (left
  /// as it is), each with a warning.
  std::map<std::string, Algo> read(bool *foreign) const;

  std::string path_, scope_;
  std::map<std::string, Algo> entries_; ///< by "<scope> | <key>"
  std::map<std::string, Algo> added_;
};

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_MATMULTUNECACHE_H
