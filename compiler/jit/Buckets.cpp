//===- Buckets.cpp - Which bucket a symbolic length pads to ---------------===//

#include "compiler/jit/Buckets.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace step {
namespace {
constexpr const char *kForms =
    "pow2, pow2:MIN, mult:N or SIZE,SIZE,... with every number >= 1";

/// Whether `s` is a decimal integer >= 1 (stored in `out`).
bool positive(const std::string &s, int64_t &out) {
  if (s.empty() || s.size() > 18 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = std::strtoll(s.c_str(), nullptr, 10);
  return out >= 1;
}

[[noreturn]] void bad(const std::string &spec, const std::string &why) {
  throw std::invalid_argument("bucket policy '" + spec + "': " + why +
                              " (expected " + kForms + ")");
}
} // namespace

BucketPolicy BucketPolicy::parse(const std::string &spec) {
  BucketPolicy p;
  if (spec == "pow2")
    return p;
  if (spec.rfind("pow2:", 0) == 0) {
    if (!positive(spec.substr(5), p.step))
      bad(spec, "the smallest power of two must be an integer >= 1");
    return p;
  }
  if (spec.rfind("mult:", 0) == 0) {
    p.kind = Kind::Multiples;
    if (!positive(spec.substr(5), p.step))
      bad(spec, "the multiple must be an integer >= 1");
    return p;
  }
  p.kind = Kind::List;
  std::stringstream list(spec);
  for (std::string item; std::getline(list, item, ',');) {
    int64_t v = 0;
    if (!positive(item, v))
      bad(spec, "'" + item + "' is not a size");
    p.sizes.push_back(v);
  }
  if (p.sizes.empty() || spec.back() == ',')
    bad(spec, "no sizes");
  std::sort(p.sizes.begin(), p.sizes.end());
  p.sizes.erase(std::unique(p.sizes.begin(), p.sizes.end()), p.sizes.end());
  return p;
}

std::string BucketPolicy::str() const {
  switch (kind) {
  case Kind::PowersOfTwo:
    return step == 16 ? "pow2" : "pow2:" + std::to_string(step);
  case Kind::Multiples:
    return "mult:" + std::to_string(step);
  case Kind::List:
    break;
  }
  std::string s;
  for (int64_t v : sizes)
    s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

int64_t BucketPolicy::round(int64_t n, int64_t max) const {
  if (n < 1 || n > max)
    throw std::invalid_argument("length " + std::to_string(n) +
                                " is outside 1.." + std::to_string(max));
  switch (kind) {
  case Kind::PowersOfTwo: {
    int64_t b = step;
    while (b < n)
      b *= 2;
    return std::min(b, max);
  }
  case Kind::Multiples:
    return std::min((n + step - 1) / step * step, max);
  case Kind::List:
    break;
  }
  auto it = std::lower_bound(sizes.begin(), sizes.end(), n);
  if (it == sizes.end())
    throw std::invalid_argument("length " + std::to_string(n) +
                                " exceeds the largest bucket " +
                                std::to_string(sizes.back()) + " of " + str());
  return *it;
}

std::vector<int64_t> BucketPolicy::all(int64_t max) const {
  if (kind == Kind::List)
    return sizes;
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= max;) {
    int64_t b = round(n, max);
    out.push_back(b);
    n = b + 1;
  }
  return out;
}

std::pair<std::string, BucketPolicy>
parseBucketOption(const std::string &s) {
  size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0)
    throw std::invalid_argument("'" + s + "' must be SYMBOL:POLICY, e.g. " +
                                "T:128,256,512, T:pow2 or T:mult:64");
  return {s.substr(0, colon), BucketPolicy::parse(s.substr(colon + 1))};
}

} // namespace step
