//===- CodegenTestUtil.h - Parsing IR for the codegen tests -----*- C++ -*-===//
#ifndef STEP_TESTS_UNIT_CODEGEN_CODEGENTESTUTIL_H
#define STEP_TESTS_UNIT_CODEGEN_CODEGENTESTUTIL_H

#include "compiler/codegen/CudaKernels.h"
#include "compiler/codegen/Nvrtc.h"
#include "dialects/step/StepOps.h"
#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

namespace step::codegen::test {

/// A parsed module that keeps its context alive.
struct Parsed {
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;

  mlir::func::FuncOp func(const std::string &name = "f") {
    return module->lookupSymbol<mlir::func::FuncOp>(name);
  }
};

inline Parsed parse(const std::string &text) {
  Parsed p;
  p.ctx = std::make_unique<mlir::MLIRContext>();
  p.ctx->loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  p.module = mlir::parseSourceString<mlir::ModuleOp>(text, p.ctx.get());
  EXPECT_TRUE(p.module) << "does not parse:\n" << text;
  return p;
}

/// The kernel of the first op of @f in `text` (a module with one func @f).
inline KernelSource firstKernel(const std::string &text,
                                const std::string &name = "k") {
  Parsed p = parse(text);
  if (!p.module)
    return {};
  mlir::Operation &op = p.func().getBody().front().front();
  auto ks = emitKernel(&op, name);
  EXPECT_TRUE(ks.has_value()) << "no kernel for " << text;
  return ks ? *ks : KernelSource{};
}

/// Compiles `ks` for sm_80 and sm_90 in a fresh cache (removed after);
/// fails the test with NVRTC's message and the source on an error.
inline void expectCubinsForSm80AndSm90(const KernelSource &ks) {
  ASSERT_FALSE(ks.source.empty());
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("stepjit-codegen-test-" + std::to_string(::getpid()) + "-" +
                  ks.name);
  fs::remove_all(dir);
  NvrtcOptions opts;
  opts.cacheDir = dir.string();
  opts.ptxArch = "";
  try {
    std::vector<CompiledKernel> out = compileKernels({ks}, opts);
    ASSERT_EQ(out.size(), 1u);
    for (const char *arch : {"sm_80", "sm_90"}) {
      ASSERT_GT(out[0].cubin[arch].size(), 4u) << arch;
      EXPECT_EQ(out[0].cubin[arch].substr(0, 4), "\x7f" "ELF") << arch;
    }
  } catch (const rt::Error &e) {
    ADD_FAILURE() << e.what() << "\n" << ks.source;
  }
  fs::remove_all(dir);
}

inline bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// How many times `part` occurs in `s` (overlapping occurrences count).
inline size_t count(const std::string &s, const std::string &part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos;
       at = s.find(part, at + 1))
    ++n;
  return n;
}

/// A module whose @f takes `args` ("%a: tensor<...>, ...") and returns the
/// single result of `op` ("%r = step... ") of type `result`.
inline std::string fn(const std::string &args, const std::string &op,
                      const std::string &result) {
  return "func.func @f(" + args + ") -> " + result + " {\n  %r = " + op +
         "\n  return %r : " + result + "\n}\n";
}

/// A kernel's parameter names, in order.
using Params = std::vector<std::string>;

} // namespace step::codegen::test

#endif // STEP_TESTS_UNIT_CODEGEN_CODEGENTESTUTIL_H
