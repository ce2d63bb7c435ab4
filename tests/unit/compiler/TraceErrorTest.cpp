//===- TraceErrorTest.cpp - Every tracing error names op and shapes -------===//
//
// Each mistake throws before any op reaches the module; the message starts
// with the op, quotes the shapes involved and ends with the caller's line.
// After an error the graph stays usable (a rejected op leaves nothing
// behind).
//
//===----------------------------------------------------------------------===//

#include "TraceTestUtil.h"

namespace step::trace {
namespace {
using namespace test;

TEST(TraceError, MatmulContractingDims) {
  Graph g;
  Tensor x = g.input("x", {32, 784});
  Tensor w = g.param("w", {785, 256}, init::zeros());
  std::string msg = errorOf<ShapeError>([&] { matmul(x, w); });
  EXPECT_EQ(msg.rfind("matmul: contracting dims differ: [32, 784] @ [785, 256]",
                      0),
            0u)
      << msg;
}

TEST(TraceError, MessageEndsWithTheCallerLine) {
  Graph g;
  Tensor a = g.input("a", {3, 4});
  Tensor b = g.input("b", {5});
  unsigned line = __LINE__ + 1;
  std::string msg = errorOf<ShapeError>([&] { (void)(a + b); });
  EXPECT_CONTAINS(msg, "add: cannot broadcast [3, 4] with [5]");
  EXPECT_CONTAINS(msg, "(at " + std::string(__FILE__) + ":" +
                           std::to_string(line) + ")");
}

TEST(TraceError, BroadcastOfEveryBinaryOp) {
  Graph g;
  Tensor a = g.input("a", {3, 4});
  Tensor b = g.input("b", {2, 4});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { sub(a, b); }),
                  "sub: cannot broadcast [3, 4] with [2, 4]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { maximum(a, b); }),
                  "maximum: cannot broadcast [3, 4] with [2, 4]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { (void)(a < b); }),
                  "lt: cannot broadcast [3, 4] with [2, 4]");
  Tensor p = g.input("p", {5}, DType::I1);
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { where(p, a, b); }),
                  "where: cannot broadcast [5] with [3, 4] with [2, 4]");
}

TEST(TraceError, MatmulBatchAndRank) {
  Graph g;
  Tensor a = g.input("a", {2, 3, 4});
  Tensor b = g.input("b", {5, 4, 6});
  Tensor s = g.input("s", {});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { matmul(a, b); }),
                  "matmul: batch dims cannot broadcast: [2, 3, 4] @ [5, 4, 6]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { matmul(s, b); }),
                  "matmul: both arguments need at least 1 dim, got [] @ "
                  "[5, 4, 6]");
}

TEST(TraceError, ShapeOps) {
  Graph g;
  Tensor x = g.input("x", {2, 3});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { reshape(x, {4, 2}); }),
                  "reshape: cannot reshape [2, 3] (6 elements) to [4, 2] "
                  "(8 elements)");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { reshape(x, {4, -1}); }),
                  "reshape: cannot reshape [2, 3] (6 elements) to [4, -1]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { reshape(x, {-1, -1}); }),
                  "reshape: only one dim may be -1, got [-1, -1]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { transpose(x, {0, 0}); }),
                  "transpose: perm [0, 0] is not a permutation of the 2 dims "
                  "of [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { transpose(x, 0, 2); }),
                  "transpose: dim 2 is out of range for [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { slice(x, 2, 0, 1); }),
                  "slice: dim 2 is out of range for [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { pad(x, {0, -1}, {0, 0}); }),
                  "pad: padding must be >= 0, got low [0, -1] and high [0, 0] "
                  "for [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { pad(x, {0}, {0}); }),
                  "pad: low [0] and high [0] need one entry per dim of [2, 3]");
  Tensor y = g.input("y", {2, 4});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { concat({x, y}, 0); }),
                  "concat: shapes [2, 3] and [2, 4] differ in dim 1");
  Tensor z = g.input("z", {3});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { concat({x, z}, 0); }),
                  "concat: tensors must have one rank, got [2, 3] and [3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { t(g.input("r3", {1, 2, 3})); }),
                  "t: expects a tensor of rank <= 2, got [1, 2, 3]");
  Tensor d = g.input("d", {kDynamic, 3});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { slice(d, 1, 0, 2); }),
                  "slice: dim 0 of [?, 3] is dynamic");
}

TEST(TraceError, InferenceMessagesArePassedOn) {
  // Checked by the op's own shape inference: the message is the dialect's,
  // prefixed with the traced op.
  Graph g;
  Tensor x = g.input("x", {4, 8});
  std::string msg = errorOf<ShapeError>(
      [&] { slice(x, {0, 0}, {5, 8}, {1, 1}); });
  EXPECT_CONTAINS(msg, "slice: 'step.slice' op dim 0: expected 0 <= start (0) "
                       "<= limit (5) <= size (4)");
  EXPECT_CONTAINS(msg, "tensor<4x8xf32>");
  // The rejected op left nothing behind: the graph still verifies.
  g.output(sum(x));
  EXPECT_NO_THROW(g.mlir());
  EXPECT_EQ(countOps(g, "step.slice"), 0);
}

TEST(TraceError, Reductions) {
  Graph g;
  Tensor x = g.input("x", {2, 3});
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { sum(x, 2); }),
                  "sum: dim 2 is out of range for [2, 3] (expected [-2, 1])");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { amax(x, {1, -1}); }),
                  "amax: dim -1 is repeated in [1, -1] for [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { mean(x, -3); }),
                  "mean: dim -3 is out of range for [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { softmax(x, 2); }),
                  "softmax: dim 2 is out of range for [2, 3]");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { log_softmax(x, -3); }),
                  "log_softmax: dim -3 is out of range for [2, 3]");
}

TEST(TraceError, NeuralNetworkOps) {
  Graph g;
  Tensor x = g.input("x", {4, 8});
  Tensor w7 = g.param("w7", {7}, init::ones());
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { layer_norm(x, w7); }),
                  "layer_norm: weight [7] must equal the trailing dims of the "
                  "input [4, 8]");
  Tensor w8 = g.param("w8", {8}, init::ones());
  Tensor b7 = g.param("b7", {7}, init::zeros());
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { layer_norm(x, w8, b7); }),
                  "layer_norm: bias [7] must have the shape of weight [8]");
  Tensor idx = g.input("idx", {4}, DType::I64);
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { embedding(idx, w8); }),
                  "embedding: weight must be a [V, D] table, got [8]");
  Tensor y = g.input("y", {3}, DType::I64);
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { cross_entropy(x, y); }),
                  "cross_entropy: targets [3] do not fit logits [4, 8] "
                  "(expected targets of shape [4]");
  Tensor q = g.input("q", {2, 5, 8});
  Tensor k = g.input("k", {2, 6, 7});
  EXPECT_CONTAINS(
      errorOf<ShapeError>([&] { scaled_dot_product_attention(q, k, k); }),
      "scaled_dot_product_attention: query and key disagree on the head dim: "
      "query [2, 5, 8], key [2, 6, 7], value [2, 6, 7]");
}

TEST(TraceError, DTypes) {
  Graph g;
  Tensor i = g.input("i", {2, 2}, DType::I32);
  Tensor f = g.input("f", {2, 2});
  Tensor b = g.input("b", {2, 2}, DType::I1);
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { matmul(i, i); }),
                  "matmul: needs float operands, got i32 @ i32");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { mean(i); }),
                  "mean: needs a float tensor, got i32");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { where(f, f, f); }),
                  "where: the condition must be i1 (bool), got f32");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { (void)(b + b); }),
                  "add: bool operands are not supported");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { trunc_div(f, 2); }),
                  "trunc_div: needs integer operands, got f32");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { embedding(f, f); }),
                  "embedding: indices must be an integer tensor (i32, i64), "
                  "got f32 [2, 2]");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { cross_entropy(f, f); }),
                  "cross_entropy: targets must be an integer tensor");
  EXPECT_CONTAINS(errorOf<DTypeError>([&] { softmax(i, 0); }),
                  "softmax: the input must be a float tensor");
}

TEST(TraceError, ArgumentsAndOutputs) {
  Graph g;
  Tensor x = g.input("x", {2});
  EXPECT_THROW(g.input("x", {2}), std::invalid_argument); // duplicate
  EXPECT_THROW(g.input("../etc", {2}), std::invalid_argument);
  EXPECT_THROW(g.input("", {2}), std::invalid_argument);
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { g.input("bad", {2, -3}); }),
                  "input 'bad': invalid shape [2, -3]");
  EXPECT_CONTAINS(
      errorOf<ShapeError>([&] { g.param("p", {kDynamic}, init::zeros()); }),
      "param 'p': invalid shape [-1] (dims must be static and >= 0)");
  EXPECT_CONTAINS(errorOf<std::invalid_argument>(
                      [&] { g.param("k", {4}, init::kaimingUniform()); }),
                  "need a weight of rank >= 2");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { g.output(x); }),
                  "output: the loss must be a scalar f32 tensor (model "
                  "contract), got f32 [2]");
  EXPECT_THROW(g.mlir(), std::logic_error); // no output yet
  Graph other;
  Tensor y = other.input("y", {2});
  EXPECT_THROW((void)(x + y), std::invalid_argument);
  EXPECT_THROW((void)(x + Tensor()), std::invalid_argument);
  g.output(sum(x));
  EXPECT_THROW((void)(x + x), std::logic_error); // finished
  EXPECT_THROW(g.input("z", {1}), std::logic_error);
}

TEST(TraceError, ValueArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 3});
  EXPECT_CONTAINS(errorOf<TraceError>([&] { dropout(x, 1.0, 0); }),
                  "dropout: p must be in [0, 1)");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { g.arange(5, 1); }),
                  "arange: empty range [5, 1) with step 1");
  EXPECT_CONTAINS(errorOf<ShapeError>([&] { g.full({kDynamic}, 1.0); }),
                  "full: invalid shape [-1]");
}

} // namespace
} // namespace step::trace
