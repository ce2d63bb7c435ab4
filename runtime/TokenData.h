//===- TokenData.h - Token files and a background batch prefetcher -*- C++ -*-===//
//
// The input pipeline of a language model's training step (docs/data.md):
//
//   - A token file holds a tokenized corpus: a 32-byte header (magic
//     "STEPTOK1", format version 1, bytes per token 1, 2 or 4, the token
//     count, a reserved zero word) and the tokens, little-endian unsigned.
//     TokenFile maps it read-only (mmap), so a corpus larger than memory
//     costs only the pages a batch touches.
//   - Batch k of a BatchSpec is a pure function of (file, spec, k): B rows
//     of T + 1 consecutive tokens, `tokens` the first T and `targets` the
//     last T, as i64 or i32. Rows start at seeded random offsets
//     (splitmix64 of seed, k, row) or, sequentially, at (k B + row) T
//     (wrapping). So any reader, a resumed run or a prefetching one, gets
//     the same batch k.
//   - Prefetcher fills batches k, k + 1, ... on a thread of its own into a
//     ring of `depth` slots while the caller's step runs; next() hands them
//     out in order and measures how long the caller waited. An error in
//     the thread is rethrown by next().
//
// On a GPU the step uploads its inputs itself (Session::step); a batch is a
// few hundred KB, so what the prefetcher hides is the host's part: page
// faults on the mapped file and assembling rows.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_TOKENDATA_H
#define STEP_RUNTIME_TOKENDATA_H

#include "runtime/Tensor.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace step::rt {

/// Writes `tokens` as a token file of `bytesPerToken` (1, 2 or 4) bytes per
/// token, atomically (a temporary file renamed into place). Throws Error,
/// writing nothing, when a token does not fit the width.
void writeTokenFile(const std::string &path,
                    const std::vector<uint32_t> &tokens, int bytesPerToken);

/// A token file mapped read-only. Throws Error naming the file and what is
/// wrong: missing, too short, wrong magic or version, a width other than
/// 1, 2 or 4, or a size that is not header + count * width.
class TokenFile {
public:
  explicit TokenFile(const std::string &path);
  ~TokenFile();
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;

  const std::string &path() const { return path_; }
  int64_t size() const { return count_; }
  int bytesPerToken() const { return width_; }
  uint32_t at(int64_t i) const;

private:
  std::string path_;
  const uint8_t *tokens_ = nullptr; ///< past the header
  void *map_ = nullptr;
  size_t mapBytes_ = 0;
  int64_t count_ = 0;
  int width_ = 1;
};

struct BatchSpec {
  int64_t batch = 1, context = 1; ///< B rows of T tokens
  uint64_t seed = 0;
  /// Rows at (k B + row) T, wrapping (a validation pass), instead of at
  /// random offsets.
  bool sequential = false;
  DType dtype = DType::I64; ///< of `tokens` and `targets`
};

/// Batch `index` of `spec` from `file`: {"tokens": [B, T], "targets": [B,
/// T]}. Throws Error when the file holds fewer than T + 1 tokens.
std::map<std::string, HostTensor> tokenBatch(const TokenFile &file,
                                             const BatchSpec &spec,
                                             int64_t index);

/// Batches first, first + 1, ... of `spec`, made ahead on a thread.
class Prefetcher {
public:
  /// `depth` batches are made ahead (at least 1); depth 0 makes each batch
  /// in next(), on the caller's thread (the same batches).
  Prefetcher(std::shared_ptr<const TokenFile> file, BatchSpec spec,
             int64_t first = 0, int depth = 2);
  ~Prefetcher();
  Prefetcher(const Prefetcher &) = delete;
  Prefetcher &operator=(const Prefetcher &) = delete;

  /// The next batch, in order; blocks until it is ready.
  std::map<std::string, HostTensor> next();
  /// The index next() returns next.
  int64_t position() const { return next_; }
  /// Seconds the last next() call, and all of them, waited.
  double lastWait() const { return lastWait_; }
  double totalWait() const { return totalWait_; }

private:
  void loop();

  std::shared_ptr<const TokenFile> file_;
  BatchSpec spec_;
  int depth_;
  int64_t next_;     ///< handed out next
  int64_t made_;     ///< the thread makes this one next
  double lastWait_ = 0, totalWait_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::map<std::string, HostTensor>> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_; ///< last: starts once the members above exist
};

} // namespace step::rt

#endif // STEP_RUNTIME_TOKENDATA_H
