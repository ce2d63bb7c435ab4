//===- TraceBroadcastTest.cpp - Broadcasting, promotion, emitted IR -------===//
//
// What the tracer emits for NumPy broadcasting and PyTorch dtype promotion:
// the result shapes and dtypes, and exactly which step.broadcast_in_dim,
// step.cast and step.constant ops appear.
//
//===----------------------------------------------------------------------===//

#include "TraceTestUtil.h"

#include "compiler/trace/GraphState.h"

namespace step::trace {
namespace {
using namespace test;

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

TEST(TraceBroadcast, BiasIsBroadcastAlongTheBatchDim) {
  Graph g;
  Tensor x = g.input("x", {32, 256});
  Tensor b = g.param("b", {256}, init::zeros());
  Tensor y = x + b;
  EXPECT_EQ(y.shape(), (Shape{32, 256}));
  EXPECT_EQ(opNames(g),
            (std::vector<std::string>{"step.broadcast_in_dim", "step.add"}));
  EXPECT_CONTAINS(printed(g), "step.broadcast_in_dim %arg1, dims = [1] : "
                              "tensor<256xf32> -> tensor<32x256xf32>");
}

TEST(TraceBroadcast, SizeOneDimsExpandOnBothSides) {
  Graph g;
  Tensor a = g.input("a", {3, 1});
  Tensor b = g.input("b", {1, 4});
  Tensor y = a * b;
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(countOps(g, "step.broadcast_in_dim"), 2);
  // Size-1 operand dims are mapped, not reshaped away: the op repeats them.
  EXPECT_CONTAINS(printed(g), "dims = [0, 1] : tensor<3x1xf32> -> "
                              "tensor<3x4xf32>");
  EXPECT_CONTAINS(printed(g), "dims = [0, 1] : tensor<1x4xf32> -> "
                              "tensor<3x4xf32>");
}

TEST(TraceBroadcast, LowerRankOperandIsAlignedRight) {
  Graph g;
  Tensor a = g.input("a", {2, 3, 4});
  Tensor b = g.input("b", {3, 1});
  Tensor y = a - b;
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(countOps(g, "step.broadcast_in_dim"), 1);
  EXPECT_CONTAINS(printed(g), "dims = [1, 2] : tensor<3x1xf32> -> "
                              "tensor<2x3x4xf32>");
}

TEST(TraceBroadcast, RankZeroTensorBroadcastsWithNoDims) {
  Graph g;
  Tensor a = g.input("a", {});
  Tensor b = g.input("b", {2, 3});
  Tensor y = a + b;
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_CONTAINS(printed(g), "dims = [] : tensor<f32> -> tensor<2x3xf32>");
}

TEST(TraceBroadcast, EqualShapesNeedNoBroadcast) {
  Graph g;
  Tensor a = g.input("a", {2, 3});
  Tensor b = g.input("b", {2, 3});
  (void)(a / b);
  EXPECT_EQ(opNames(g), (std::vector<std::string>{"step.div"}));
}

TEST(TraceBroadcast, ScalarBecomesSplatConstantOfTheTensorType) {
  Graph g;
  Tensor x = g.input("x", {5}, DType::BF16);
  Tensor y = x * 2.0;
  EXPECT_EQ(y.dtype(), DType::BF16);
  EXPECT_EQ(opNames(g),
            (std::vector<std::string>{"step.constant", "step.mul"}));
  EXPECT_CONTAINS(printed(g), "dense<2.000000e+00> : tensor<5xbf16>");
  Tensor z = 1 - x; // scalar on the left keeps its place
  EXPECT_CONTAINS(printed(g), "step.sub %");
  EXPECT_EQ(z.shape(), (Shape{5}));
}

TEST(TraceBroadcast, DynamicDimsJoinWithoutBroadcast) {
  Graph g;
  Tensor a = g.input("a", {kDynamic, 4});
  Tensor b = g.input("b", {kDynamic, 4});
  Tensor c = g.input("c", {3, 4});
  EXPECT_EQ((a + b).shape(), (Shape{kDynamic, 4}));
  // A dynamic dim meeting a static one is taken to be equal to it.
  EXPECT_EQ((a + c).shape(), (Shape{3, 4}));
  EXPECT_EQ(countOps(g, "step.broadcast_in_dim"), 0);
}

TEST(TraceBroadcast, DynamicDimPassesThroughBroadcast) {
  Graph g;
  Tensor a = g.input("a", {kDynamic, 1});
  Tensor b = g.input("b", {kDynamic, 4});
  EXPECT_EQ((a + b).shape(), (Shape{kDynamic, 4}));
  EXPECT_CONTAINS(printed(g), "dims = [0, 1] : tensor<?x1xf32> -> "
                              "tensor<?x4xf32>");
}

TEST(TraceBroadcast, BroadcastIntoADynamicDimLeavesItUnmapped) {
  // A bias or a scalar broadcast into a dynamic dim: the new dim is not
  // mapped from the operand (step-pad-dynamic sizes it from the value it is
  // combined with).
  Graph g;
  Tensor x = g.input("x", {kDynamic, 4});
  Tensor b = g.input("b", {1, 4});
  EXPECT_EQ((x + b).shape(), (Shape{kDynamic, 4}));
  EXPECT_CONTAINS(printed(g), "step.reshape %arg1 : tensor<1x4xf32> -> "
                              "tensor<4xf32>");
  EXPECT_CONTAINS(printed(g), "dims = [1] : tensor<4xf32> -> "
                              "tensor<?x4xf32>");
  EXPECT_EQ((x * 2.0).shape(), (Shape{kDynamic, 4}));
  EXPECT_CONTAINS(printed(g), "dims = [] : tensor<f32> -> tensor<?x4xf32>");
}

TEST(TraceBroadcast, WhereBroadcastsAllThree) {
  Graph g;
  Tensor p = g.input("p", {3, 1}, DType::I1);
  Tensor a = g.input("a", {1, 4});
  Tensor y = where(p, a, 0.0);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(countOps(g, "step.broadcast_in_dim"), 2);
  EXPECT_EQ(countOps(g, "step.constant"), 1);
  EXPECT_EQ(countOps(g, "step.select"), 1);
}

TEST(TraceBroadcast, ComparisonGivesBool) {
  Graph g;
  Tensor a = g.input("a", {2, 3}, DType::I32);
  Tensor m = a > 0;
  EXPECT_EQ(m.dtype(), DType::I1);
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  EXPECT_CONTAINS(printed(g), "step.compare gt");
}

TEST(TraceBroadcast, MatmulSharesARank2Rhs) {
  Graph g;
  Tensor x = g.input("x", {4, 5, 6});
  Tensor w = g.input("w", {1, 6, 7});
  Tensor y = matmul(x, w);
  EXPECT_EQ(y.shape(), (Shape{4, 5, 7}));
  // [1, 6, 7] is reshaped to [6, 7] and shared, not broadcast to [4, 6, 7].
  EXPECT_EQ(countOps(g, "step.broadcast_in_dim"), 0);
  EXPECT_CONTAINS(printed(g), "tensor<4x5x6xf32>, tensor<6x7xf32> -> "
                              "tensor<4x5x7xf32>");
}

TEST(TraceBroadcast, MatmulBroadcastsBatchDims) {
  Graph g;
  Tensor a = g.input("a", {2, 1, 3, 4});
  Tensor b = g.input("b", {5, 4, 6});
  Tensor y = matmul(a, b);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 3, 6}));
  EXPECT_EQ(countOps(g, "step.broadcast_in_dim"), 2);
  EXPECT_CONTAINS(printed(g), "tensor<2x5x3x4xf32>, tensor<2x5x4x6xf32> -> "
                              "tensor<2x5x3x6xf32>");
}

TEST(TraceBroadcast, MatmulOfVectors) {
  Graph g;
  Tensor v = g.input("v", {3});
  Tensor m = g.input("m", {3, 4});
  EXPECT_EQ(matmul(v, v).shape(), Shape{});
  EXPECT_EQ(matmul(v, m).shape(), Shape{4});
  EXPECT_EQ(matmul(t(m), v).shape(), Shape{4});
}

TEST(TraceBroadcast, LocationsPointAtTheCallerLine) {
  Graph g;
  Tensor x = g.input("x", {2});
  unsigned line = __LINE__ + 1;
  Tensor y = x + x;
  std::string loc;
  llvm::raw_string_ostream os(loc);
  y.value().getDefiningOp()->getLoc().print(os);
  EXPECT_CONTAINS(loc, "\"add\"");
  EXPECT_CONTAINS(loc, std::string(__FILE__) + "\":" + std::to_string(line));
}

//===----------------------------------------------------------------------===//
// Dtype promotion
//===----------------------------------------------------------------------===//

struct PromotionCase {
  DType a, b, expected;
};

class TracePromotion : public ::testing::TestWithParam<PromotionCase> {};

TEST_P(TracePromotion, TensorTensor) {
  PromotionCase c = GetParam();
  Graph g;
  Tensor a = g.input("a", {2}, c.a);
  Tensor b = g.input("b", {2}, c.b);
  // add rejects i1 results; the promotion itself is shared by every op.
  EXPECT_EQ(detail::resultType({a, b}), c.expected);
  if (c.expected != DType::I1) {
    Tensor y = a + b;
    EXPECT_EQ(y.dtype(), c.expected);
    // One cast per operand whose dtype differs from the result.
    EXPECT_EQ(countOps(g, "step.cast"),
              int(c.a != c.expected) + int(c.b != c.expected));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, TracePromotion,
    ::testing::Values(
        PromotionCase{DType::F32, DType::F32, DType::F32},
        PromotionCase{DType::BF16, DType::BF16, DType::BF16},
        PromotionCase{DType::F16, DType::BF16, DType::F32},
        PromotionCase{DType::F16, DType::F32, DType::F32},
        PromotionCase{DType::F32, DType::BF16, DType::F32},
        PromotionCase{DType::I32, DType::I64, DType::I64},
        PromotionCase{DType::I32, DType::F16, DType::F16},
        PromotionCase{DType::I64, DType::BF16, DType::BF16},
        PromotionCase{DType::I64, DType::F32, DType::F32},
        PromotionCase{DType::I1, DType::I32, DType::I32},
        PromotionCase{DType::I1, DType::F16, DType::F16},
        PromotionCase{DType::I1, DType::I1, DType::I1}));

TEST(TracePromotionScalar, ScalarsDoNotWidenWithinACategory) {
  Graph g;
  Tensor h = g.input("h", {2}, DType::BF16);
  Tensor i = g.input("i", {2}, DType::I32);
  Tensor b = g.input("b", {2}, DType::I1);
  EXPECT_EQ((h * 2.0).dtype(), DType::BF16);
  EXPECT_EQ((h * 2).dtype(), DType::BF16);
  EXPECT_EQ((i * 2).dtype(), DType::I32);
  EXPECT_EQ((i * 2.5).dtype(), DType::F32); // int tensor, float scalar
  EXPECT_EQ((b + 2).dtype(), DType::I64);   // bool tensor, int scalar
  EXPECT_EQ(detail::resultType({b, Scalar(true)}), DType::I1);
  EXPECT_EQ((2.5 * i).dtype(), DType::F32);
}

TEST(TracePromotionScalar, ZeroDimTensorsActLikeScalars) {
  Graph g;
  Tensor h = g.input("h", {3}, DType::F16);
  Tensor i = g.input("i", {3}, DType::I32);
  Tensor s32 = g.input("s32", {}, DType::F32);
  Tensor s16 = g.input("s16", {}, DType::F16);
  Tensor sb = g.input("sb", {}, DType::BF16);
  EXPECT_EQ((h + s32).dtype(), DType::F16);  // same category: tensor wins
  EXPECT_EQ((i + s16).dtype(), DType::F16);  // higher category: 0-d wins
  EXPECT_EQ((sb + s16).dtype(), DType::F32); // two 0-d tensors: promote
}

TEST(TracePromotionScalar, DivisionAndPowComputeInFloat) {
  Graph g;
  Tensor i = g.input("i", {2}, DType::I32);
  Tensor j = g.input("j", {2}, DType::I64);
  EXPECT_EQ((i / j).dtype(), DType::F32);
  EXPECT_EQ((j / 2).dtype(), DType::F32);
  EXPECT_EQ(pow(i, 2).dtype(), DType::F32);
  EXPECT_EQ(trunc_div(i, j).dtype(), DType::I64);
  EXPECT_EQ(exp(i).dtype(), DType::F32);
  EXPECT_EQ(relu(i).dtype(), DType::I32);
  EXPECT_EQ(sum(i).dtype(), DType::I64); // torch.sum of int32 is int64
}

TEST(TracePromotionScalar, CastIsInsertedOnTheNarrowSideOnly) {
  Graph g;
  Tensor i = g.input("i", {2}, DType::I32);
  Tensor h = g.input("h", {2}, DType::F16);
  (void)(i + h);
  EXPECT_EQ(opNames(g),
            (std::vector<std::string>{"step.cast", "step.add"}));
  EXPECT_CONTAINS(printed(g),
                  "step.cast %arg0 : tensor<2xi32> -> tensor<2xf16>");
}

TEST(TracePromotionScalar, ConcatPromotes) {
  Graph g;
  Tensor a = g.input("a", {2}, DType::I64);
  Tensor b = g.input("b", {3}, DType::BF16);
  Tensor c = concat({a, b});
  EXPECT_EQ(c.dtype(), DType::BF16);
  EXPECT_EQ(c.shape(), Shape{5});
}

} // namespace
} // namespace step::trace
