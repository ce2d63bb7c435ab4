//===- step-opt.cpp - The StepJIT optimizer driver ------------------------===//
//
// mlir-opt for the step dialect: parses a file, verifies it, runs the passes
// named on the command line and prints the result. Lit tests drive it.
//
//===----------------------------------------------------------------------===//

#include "dialects/step/StepOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::step::registerStepPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::step::StepDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "StepJIT optimizer driver\n", registry));
}
