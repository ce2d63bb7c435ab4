//===- SessionUtil.h - What Session's source files share -------*- C++ -*-===//
//
// Small helpers of runtime/Session*.cpp's messages. Internal: not installed,
// not part of the host API.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_SESSIONUTIL_H
#define STEP_RUNTIME_SESSIONUTIL_H

#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace step::detail {

/// "a, b, c", or "none".
inline std::string joined(const std::vector<std::string> &names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

} // namespace step::detail

#endif
