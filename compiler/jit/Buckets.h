//===- Buckets.h - Which bucket a symbolic length pads to -------*- C++ -*-===//
//
// A bucket policy maps a valid length 1 <= n <= max of one symbol to the
// size step-pad-dynamic pads it to (docs/dynamic-shapes.md):
//
//   pow2[:MIN]   the next power of two >= n, at least MIN (default 16)
//   mult:N       the next multiple of N >= n
//   S1,S2,...    the smallest listed size >= n
//
// Every policy caps at the symbol's maximum, which is therefore always a
// bucket of pow2 and mult (so every valid length has one); a list holds
// only what it names. AOT (`stepc --buckets=T:pow2`) compiles every bucket
// the policy can produce (all()); the JIT compiles the one a batch needs
// (round()) on first use.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_JIT_BUCKETS_H
#define STEP_COMPILER_JIT_BUCKETS_H

#include <cstdint>
#include <string>
#include <vector>

namespace step {

struct BucketPolicy {
  enum class Kind { PowersOfTwo, Multiples, List };
  Kind kind = Kind::PowersOfTwo;
  /// PowersOfTwo: the smallest bucket; Multiples: N.
  int64_t step = 16;
  /// List: the sizes, ascending and distinct.
  std::vector<int64_t> sizes;

  /// "pow2", "pow2:8", "mult:64", "128,256,512"; throws
  /// std::invalid_argument naming what is wrong.
  static BucketPolicy parse(const std::string &spec);
  /// The spec parse() reads back.
  std::string str() const;

  /// The bucket of a valid length `n` (1 <= n <= max). Throws
  /// std::invalid_argument when a list holds no size >= n.
  int64_t round(int64_t n, int64_t max) const;
  /// Every bucket round() can give for lengths 1..max, ascending (a list's
  /// sizes above `max` are kept: step-pad-dynamic reports them).
  std::vector<int64_t> all(int64_t max) const;
};

/// `--buckets=SYMBOL:SPEC` split into the symbol and its policy; throws
/// std::invalid_argument with the expected form.
std::pair<std::string, BucketPolicy> parseBucketOption(const std::string &s);

} // namespace step

#endif // STEP_COMPILER_JIT_BUCKETS_H
