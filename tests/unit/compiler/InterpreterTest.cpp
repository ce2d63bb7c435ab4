//===- InterpreterTest.cpp - step::interpret on hand-written modules ------===//
//
// The reference interpreter on modules parsed from text: splat constants
// (folded to full tensors by the interpreter, and folded away by the step
// folders with the same results), func.call, dynamic argument dims, and the
// errors for arguments that do not fit the signature (each names the
// argument).
//
//===----------------------------------------------------------------------===//

#include "TraceTestUtil.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace step {
namespace {
using trace::test::contains;
using trace::test::expectNear;
using trace::test::tensor;
using rt::DType;

/// Parses `text`, runs @forward on `args` and keeps the first diagnostic.
class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() {
    ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
    ctx.printOpOnDiagnostic(false);
  }

  mlir::FailureOr<std::vector<rt::HostTensor>>
  run(const std::string &text, const std::vector<rt::HostTensor> &args) {
    mlir::ScopedDiagnosticHandler capture(&ctx, [&](mlir::Diagnostic &d) {
      if (diagnostic.empty())
        diagnostic = d.str();
      return mlir::success();
    });
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (!module || mlir::failed(mlir::verify(*module)))
      return mlir::failure();
    auto func = module->lookupSymbol<mlir::func::FuncOp>("forward");
    return interpret(func, args);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string diagnostic;
};

TEST_F(InterpreterTest, SplatConstantsBecomeFullTensors) {
  auto r = run(R"mlir(
    func.func @forward(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<4xbf16>, tensor<2xi1>, tensor<3xi64>) {
      %c = step.constant dense<2.5> : tensor<2x3xf32>
      %y = step.mul %x, %c : tensor<2x3xf32>
      %h = step.constant dense<-1.5> : tensor<4xbf16>
      %b = step.constant dense<true> : tensor<2xi1>
      %i = step.constant dense<[1, -2, 3]> : tensor<3xi64>
      return %y, %h, %b, %i : tensor<2x3xf32>, tensor<4xbf16>, tensor<2xi1>, tensor<3xi64>
    })mlir",
               {tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostic;
  expectNear((*r)[0], {2, 3}, {2.5, 5, 7.5, 10, 12.5, 15});
  EXPECT_EQ((*r)[1].dtype(), DType::BF16);
  expectNear((*r)[1], {4}, {-1.5, -1.5, -1.5, -1.5});
  EXPECT_EQ((*r)[2].dtype(), DType::I1);
  expectNear((*r)[2], {2}, {1, 1});
  expectNear((*r)[3], {3}, {1, -2, 3});
}

TEST_F(InterpreterTest, ConstantOnlyFunction) {
  // Nothing depends on an argument: the interpreter still evaluates it.
  auto r = run(R"mlir(
    func.func @forward() -> tensor<f32> {
      %a = step.constant dense<1.25> : tensor<2x2xf32>
      %s = step.reduce_sum %a dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
      return %s : tensor<f32>
    })mlir",
               {});
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostic;
  expectNear((*r)[0], {}, {5});
}

TEST_F(InterpreterTest, FuncCall) {
  auto r = run(R"mlir(
    func.func private @square_plus(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
      %s = step.mul %a, %a : tensor<3xf32>
      %t = step.add %s, %b : tensor<3xf32>
      return %t : tensor<3xf32>
    }
    func.func @forward(%x: tensor<3xf32>) -> tensor<3xf32> {
      %one = step.constant dense<1.0> : tensor<3xf32>
      %y = func.call @square_plus(%x, %one) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %z = func.call @square_plus(%y, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      return %z : tensor<3xf32>
    })mlir",
               {tensor(DType::F32, {3}, {0, 1, -2})});
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostic;
  // y = x^2 + 1 = [1, 2, 5]; z = y^2 + x = [1, 5, 23].
  expectNear((*r)[0], {3}, {1, 5, 23});
}

TEST(InterpreterFolding, FoldingSplatConstantsKeepsTheResults) {
  // A traced graph full of splat constants: x * 1 + 0, a constant broadcast
  // along the batch, a reshape round trip. The folders remove or merge
  // them; the interpreter must give the same bits before and after.
  trace::Graph g;
  trace::Tensor x = g.input("x", {2, 3});
  trace::Tensor c = g.full({3}, 0.5);
  trace::Tensor y = (x * 1.0 + 0.0) * c;
  trace::Tensor z = trace::reshape(trace::reshape(y, {6}), {2, 3});
  g.output(trace::sum(z), z);
  auto in = tensor(DType::F32, {2, 3}, {1, -2, 3, 0.25, 5, -6});
  std::vector<rt::HostTensor> before = g.run({{"x", in}});
  size_t opsBefore = g.forward().getBody().front().getOperations().size();

  mlir::RewritePatternSet none(g.context());
  ASSERT_TRUE(mlir::succeeded(
      mlir::applyPatternsAndFoldGreedily(g.forward(), std::move(none))));
  EXPECT_TRUE(mlir::succeeded(mlir::verify(g.module())));
  size_t opsAfter = g.forward().getBody().front().getOperations().size();
  // Gone: mul by 1, add of 0 (and their constants), the reshape pair; the
  // broadcast of the constant became a constant.
  EXPECT_LT(opsAfter, opsBefore);
  EXPECT_EQ(trace::test::countOps(g, "step.broadcast_in_dim"), 0);
  EXPECT_EQ(trace::test::countOps(g, "step.reshape"), 0);

  std::vector<rt::HostTensor> after = g.run({{"x", in}});
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_TRUE(after[i].bitwiseEqual(before[i])) << "result " << i;
  expectNear(after[1], {2, 3}, {0.5, -1, 1.5, 0.125, 2.5, -3});
}

constexpr const char *kNamed = R"mlir(
  func.func @forward(%x: tensor<?x3xf32> {step.kind = "input", step.name = "x"},
                     %w: tensor<2x3xf32> {step.kind = "param", step.name = "w"}) -> tensor<2x3xf32> {
    %c = step.add %x, %w : tensor<?x3xf32>, tensor<2x3xf32>
    return %c : tensor<2x3xf32>
  })mlir";

rt::HostTensor w23() {
  return tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
}

TEST_F(InterpreterTest, DynamicDimsAcceptAnySize) {
  auto r = run(kNamed, {tensor(DType::F32, {2, 3}, {0, 0, 0, 1, 1, 1}), w23()});
  ASSERT_TRUE(mlir::succeeded(r)) << diagnostic;
  expectNear((*r)[0], {2, 3}, {1, 2, 3, 5, 6, 7});
}

TEST_F(InterpreterTest, WrongDTypeNamesTheArgument) {
  auto r = run(kNamed, {tensor(DType::F32, {2, 3}, {0, 0, 0, 1, 1, 1}),
                        tensor(DType::I32, {2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_TRUE(mlir::failed(r));
  EXPECT_TRUE(contains(diagnostic, "argument 'w'")) << diagnostic;
  EXPECT_TRUE(contains(diagnostic, "expected element type f32, found i32"))
      << diagnostic;
}

TEST_F(InterpreterTest, WrongShapeNamesTheArgument) {
  auto r = run(kNamed,
               {tensor(DType::F32, {2, 4}, {0, 0, 0, 0, 1, 1, 1, 1}), w23()});
  EXPECT_TRUE(mlir::failed(r));
  EXPECT_TRUE(contains(diagnostic, "argument 'x'")) << diagnostic;
  EXPECT_TRUE(contains(diagnostic, "tensor<?x3xf32>")) << diagnostic;
  EXPECT_TRUE(contains(diagnostic, "[2, 4]")) << diagnostic;
}

TEST_F(InterpreterTest, WrongRankAndCount) {
  auto r = run(kNamed, {tensor(DType::F32, {6}, {0, 0, 0, 1, 1, 1}), w23()});
  EXPECT_TRUE(mlir::failed(r));
  EXPECT_TRUE(contains(diagnostic, "argument 'x'")) << diagnostic;
  diagnostic.clear();
  r = run(kNamed, {w23()});
  EXPECT_TRUE(mlir::failed(r));
  EXPECT_TRUE(contains(diagnostic, "expected 2 arguments, got 1"))
      << diagnostic;
}

TEST_F(InterpreterTest, RunTimeShapeMismatchIsAnError) {
  // The dynamic dim of %x is 1 here, but %w has 2 rows: the verifier could
  // not know, the interpreter reports it at the op.
  auto r = run(kNamed, {tensor(DType::F32, {1, 3}, {0, 0, 0}), w23()});
  EXPECT_TRUE(mlir::failed(r));
  EXPECT_FALSE(diagnostic.empty());
}

} // namespace
} // namespace step
