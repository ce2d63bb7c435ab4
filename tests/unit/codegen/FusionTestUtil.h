//===- FusionTestUtil.h - Fusion ops for the kernel tests -------*- C++ -*-===//
//
// Shared by the fused-kernel tests (FusionKernelTest.cpp,
// RowChainKernelTest.cpp): a function around one hand-written step.fusion,
// counting a piece of generated source, and the NVRTC check.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_CODEGEN_FUSIONTESTUTIL_H
#define STEP_TESTS_UNIT_CODEGEN_FUSIONTESTUTIL_H

#include "CodegenTestUtil.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace step::codegen::test {

using Params = std::vector<std::string>;

/// A module whose @f takes `args`, runs the fusion `fusion` (text starting
/// with "step.fusion", assigned to %r) and returns %r of type `result`.
inline std::string fusionFn(const std::string &args, const std::string &fusion,
                            const std::string &result) {
  return "func.func @f(" + args + ") -> " + result + " {\n  %r = " + fusion +
         "\n  return %r : " + result + "\n}\n";
}

/// The same with several results, of types `rets`.
inline std::string fusionFnN(const std::string &args, const std::string &fusion,
                             const std::vector<std::string> &rets) {
  std::string types, values;
  for (size_t j = 0; j < rets.size(); ++j) {
    types += (j ? ", " : "") + rets[j];
    values += (j ? ", %r#" : "%r#") + std::to_string(j);
  }
  return "func.func @f(" + args + ") -> (" + types +
         ") {\n  %r:" + std::to_string(rets.size()) + " = " + fusion +
         "\n  return " + values + " : " + types + "\n}\n";
}

/// NVRTC compiles `ks` to sm_80 and sm_90 cubins (no PTX: the cubins are
/// what the test is about), in a fresh cache.
/// STEPJIT_DUMP_FUSION=1 prints each source.
inline void expectCompiles(const KernelSource &ks) {
  if (std::getenv("STEPJIT_DUMP_FUSION"))
    std::cout << ks.source << "\n";
  expectCubinsForSm80AndSm90(ks);
}

} // namespace step::codegen::test

#endif // STEP_TESTS_UNIT_CODEGEN_FUSIONTESTUTIL_H
