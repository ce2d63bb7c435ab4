//===- PipelineTestUtil.h - Run passes, then the interpreter ----*- C++ -*-===//
#ifndef STEP_TESTS_UNIT_COMPILER_PIPELINETESTUTIL_H
#define STEP_TESTS_UNIT_COMPILER_PIPELINETESTUTIL_H

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace step::test {

/// Parses `model`, runs the textual pass `pipeline` (may be empty) on it
/// and interprets @`func` with `values` (by argument name). Returns each
/// result's name (resultName) and value; a parse, pass or interpreter
/// failure is a test failure and returns nothing.
inline std::pair<std::vector<std::string>, std::vector<rt::HostTensor>>
interpretAfter(const std::string &model, const std::string &pipeline,
               const std::string &func,
               const std::map<std::string, rt::HostTensor> &values) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  mlir::step::registerStepPasses();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(model, &ctx);
  if (!module) {
    ADD_FAILURE() << "the model does not parse";
    return {};
  }
  mlir::PassManager pm(&ctx);
  if (!pipeline.empty()) {
    EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pipeline, pm)));
  }
  if (mlir::failed(pm.run(*module))) {
    ADD_FAILURE() << "the pipeline failed: " << pipeline;
    return {};
  }
  auto f = module->lookupSymbol<mlir::func::FuncOp>(func);
  if (!f) {
    ADD_FAILURE() << "no @" << func << " after " << pipeline;
    return {};
  }
  std::vector<rt::HostTensor> args;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    args.push_back(values.at(argumentName(f, i)));
  auto results = interpret(f, args);
  if (mlir::failed(results)) {
    ADD_FAILURE() << "the interpreter failed";
    return {};
  }
  std::vector<std::string> names;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    names.push_back(resultName(f, r));
  return {names, *results};
}

} // namespace step::test

#endif // STEP_TESTS_UNIT_COMPILER_PIPELINETESTUTIL_H
