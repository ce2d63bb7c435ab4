//===- Validators.h - Numeric flag checks with plain messages ---*- C++ -*-===//
//
// CLI11's PositiveNumber and NonNegativeNumber refuse "0" and "abc" alike as
// "Value 0 not in range 0.000000 to 1797693...": these say what was
// expected and what was found. A failed check is CLI11's ValidationError:
// "--steps: expected a whole number >= 1, found '0'", exit code 105.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TOOLS_VALIDATORS_H
#define STEP_TOOLS_VALIDATORS_H

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace step::tools {

/// A whole number >= 1 (counts: steps, micro-batches, ranks).
inline const CLI::Validator PositiveInteger(
    [](std::string &s) -> std::string {
      char *end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end || errno || v < 1)
        return "expected a whole number >= 1, found '" + s + "'";
      return "";
    },
    "INT>=1");

/// A finite number >= 0 (a clipping norm).
inline const CLI::Validator NonNegativeNumber(
    [](std::string &s) -> std::string {
      char *end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      if (s.empty() || *end || !std::isfinite(v) || v < 0)
        return "expected a number >= 0, found '" + s + "'";
      return "";
    },
    "NUMBER>=0");

} // namespace step::tools

#endif // STEP_TOOLS_VALIDATORS_H
