//===- TraceTestUtil.h - Helpers for the tracer and interpreter tests -----===//
//
// Inspecting a traced function without FileCheck (op names, printed text),
// catching an expected exception's message, and building host tensors from
// literal values.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_COMPILER_TRACETESTUTIL_H
#define STEP_TESTS_UNIT_COMPILER_TRACETESTUTIL_H

#include "compiler/trace/Trace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace step::trace::test {

/// Names of the ops in @forward's body, in order ("step.add", ...).
inline std::vector<std::string> opNames(const Graph &g) {
  std::vector<std::string> names;
  for (mlir::Operation &op : g.forward().getBody().front())
    names.push_back(op.getName().getStringRef().str());
  return names;
}

inline int countOps(const Graph &g, const std::string &name) {
  int n = 0;
  for (const std::string &s : opNames(g))
    n += s == name;
  return n;
}

/// @forward as text in the custom form. Before output() the body has no
/// terminator and would not verify, and the printer falls back to the
/// generic form for unverified IR; assumeVerified keeps the custom form.
inline std::string printed(const Graph &g) {
  std::string s;
  llvm::raw_string_ostream os(s);
  g.forward()->print(os, mlir::OpPrintingFlags().assumeVerified());
  return s;
}

inline bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_TRUE(::step::trace::test::contains(haystack, needle))                \
      << "expected to find\n  " << (needle) << "\nin\n  " << (haystack)

/// The message of the E that `f` throws; a test failure if none is thrown.
template <typename E, typename F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const E &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

inline rt::HostTensor tensor(DType t, const Shape &shape,
                             const std::vector<double> &values) {
  rt::HostTensor x(t, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), x.numel());
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, values[i]);
  return x;
}

inline std::vector<double> values(const rt::HostTensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(t.getAsDouble(i));
  return v;
}

/// Element-wise |a - b| <= tol, with shape check.
inline void expectNear(const rt::HostTensor &t, const Shape &shape,
                       const std::vector<double> &expected,
                       double tol = 1e-6) {
  EXPECT_EQ(t.shape(), shape);
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

/// max |a - b| over max |b| (normwise relative error), for one tensor;
/// infinity (and a failure) when the shapes differ.
inline double relErr(const rt::HostTensor &a, const rt::HostTensor &b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape())
    return INFINITY;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::fabs(a.getAsDouble(i) - b.getAsDouble(i)));
    scale = std::max(scale, std::fabs(b.getAsDouble(i)));
  }
  return diff / std::max(scale, 1e-30);
}

} // namespace step::trace::test

#endif // STEP_TESTS_UNIT_COMPILER_TRACETESTUTIL_H
