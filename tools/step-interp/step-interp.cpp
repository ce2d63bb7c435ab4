//===- step-interp.cpp - Run a function on the reference interpreter ------===//
//
//   step-interp FILE.mlir [--func=NAME] --inputs DIR --out DIR
//
// Reads each argument from DIR/<name>.npy (name = the argument's step.name, or
// argN); optimizer state arguments ({step.kind = "state"}) missing from DIR
// start at zero, as PyTorch's optimizer state does before the first step.
// The function defaults to @forward, or the module's only function. Runs the
// function on the CPU reference interpreter and writes each result to
// OUT/<name>.npy (the result's step.name, or resultN). Scalar results are also
// printed. Exit code 1 on any error, with a message naming the file, op or
// argument at fault.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "runtime/Npy.h"
#include "tools/Diagnostics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/SourceMgr.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"Runs a function of a step-dialect file on the CPU reference "
               "interpreter, with .npy tensors in and out."};
  std::string file, funcName, inputs, out;
  app.add_option("file", file, "input .mlir file")->required();
  app.add_option("--func", funcName,
                 "function to run (default: @forward or the only function)");
  app.add_option("--inputs", inputs, "folder with one <name>.npy per argument")
      ->required();
  app.add_option("--out", out, "folder for the <name>.npy results")->required();
  CLI11_PARSE(app, argc, argv);

  mlir::DialectRegistry registry;
  registry.insert<mlir::step::StepDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  step::tools::ToolDiagnostics diagnostics(sourceMgr, &ctx);

  std::string error;
  auto buffer = mlir::openInputFile(file, &error);
  if (!buffer) {
    std::cerr << "step-interp: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &ctx);
  if (!module || mlir::failed(mlir::verify(*module)))
    return 1;
  auto funcs = module->getOps<mlir::func::FuncOp>();
  if (funcName.empty())
    funcName = std::distance(funcs.begin(), funcs.end()) == 1
                   ? (*funcs.begin()).getName().str()
                   : "forward";
  auto func = module->lookupSymbol<mlir::func::FuncOp>(funcName);
  if (!func) {
    std::cerr << "step-interp: " << file << ": no function @" << funcName
              << "\n";
    return 1;
  }

  try {
    std::vector<::step::rt::HostTensor> args;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      std::filesystem::path path = std::filesystem::path(inputs) /
                                   (::step::argumentName(func, i) + ".npy");
      auto kind = func.getArgAttrOfType<mlir::StringAttr>(i, "step.kind");
      auto type =
          llvm::cast<mlir::RankedTensorType>(func.getArgumentTypes()[i]);
      if (!std::filesystem::exists(path) && kind &&
          kind.getValue() == "state" && type.hasStaticShape()) {
        std::cerr << "step-interp: note: " << path.string()
                  << " not found; state starts at zero\n";
        args.emplace_back(*::step::toDType(type.getElementType()),
                          ::step::rt::Shape(type.getShape()));
        continue;
      }
      if (!std::filesystem::exists(path))
        throw ::step::rt::Error("missing input for argument " +
                                std::to_string(i) + ": " + path.string());
      args.push_back(::step::rt::readNpy(path.string()));
      ::step::checkArgument(args.back(), func.getArgumentTypes()[i],
                            path.string());
    }
    auto results = ::step::interpret(func, args);
    if (mlir::failed(results))
      return 1;
    std::filesystem::create_directories(out);
    for (auto [i, r] : llvm::enumerate(*results)) {
      std::string name = ::step::resultName(func, i);
      ::step::rt::writeNpy(
          (std::filesystem::path(out) / (name + ".npy")).string(), r);
      if (r.numel() == 1 && r.rank() == 0)
        std::printf("%s = %.9g\n", name.c_str(), r.getAsDouble(0));
    }
  } catch (const ::step::rt::Error &e) {
    std::cerr << "step-interp: error: " << e.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error &e) {
    std::cerr << "step-interp: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
