//===- ShardTest.cpp - step-shard: N replicas equal one process ----------===//
//
// Tests of data parallelism and ZeRO-1/2/3 (passes/Shard.cpp) and what
// they run on (runtime/Comm.h, runtime/cpu/Collectives.cpp):
//
//  - the thread-group communicator: all_reduce (sum, max, min per dtype),
//    all_gather, broadcast and subgroups against values worked out by hand,
//    the same on every rank; groupOf's checks;
//  - rt::shardOf / rt::unshard (ZeRO's flattened, zero-padded blocks);
//  - the CPU kernels of the four collective ops on a group of 2 threads;
//  - the differential test of the pass (ShardDiff): a model traced for the
//    per-rank batch and sharded (dp, zero1, zero2, zero3 on 2 and 4 ranks)
//    runs on N threads, each on its rows of the global batch, next to the
//    same model traced for the global batch, unsharded; both on the
//    interpreter, then both on the CPU backend. Two updates of SGD with
//    momentum, clipped to 0.5; the loss, the params and the optimizer state
//    (the ranks' blocks unsharded) must agree within 1e-5 normwise: the
//    ranks add the same per-sample gradients in another order, so bits may
//    differ, and SGD is linear in the gradient. Every rank's loss and
//    replicated tensors must have the same bits. Besides the MLP and the
//    tiny GPT-2: gradient buckets, params smaller than the world, a rank-0
//    param, and the passes around step-shard (AdamW, schedules, gradient
//    accumulation, bf16/fp16 with an overflow on one rank, remat, offload,
//    no fusion); the signature's blocks and the step.shard byte counts
//    against ZeRO's factors;
//  - errors: option parsing, LAMB under ZeRO, a Session whose world size is
//    not the artifact's;
//  - Sessions on a thread group (set() of full params, step() on the rank's
//    rows, gathered()) against one unsharded Session, and their checkpoints
//    (save_params, save_shards) loaded into 1 and 4 ranks.
//
//===----------------------------------------------------------------------===//

#include "TrainStepTestUtil.h"

#include "runtime/Comm.h"
#include "runtime/Session.h"
#include "runtime/cpu/Kernels.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <thread>

#include <unistd.h>

namespace {
using namespace step;
using namespace step::test;
using rt::CommOp;
using rt::DType;
using rt::HostTensor;
using rt::Shape;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Runs body(r) on one thread per rank of `ranks`, with rank r's
/// communicator installed (CommScope), and waits for all. An exception
/// escaping a rank is a failure naming it.
void onRanks(const std::vector<std::unique_ptr<rt::Communicator>> &ranks,
             const std::function<void(int)> &body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r)
    threads.emplace_back([&, r] {
      rt::CommScope scope(*ranks[static_cast<size_t>(r)]);
      try {
        body(r);
      } catch (const std::exception &e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
}

template <typename T>
HostTensor tensorOf(DType dtype, Shape shape, const std::vector<T> &values) {
  HostTensor t(dtype, std::move(shape));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i)
    t.setFromDouble(static_cast<int64_t>(i), static_cast<double>(values[i]));
  return t;
}

std::vector<double> valuesOf(const HostTensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(t.getAsDouble(i));
  return v;
}

/// ||want - got||_2 / ||want||_2 (the absolute norm when want is zero).
double relativeError(const HostTensor &want, const HostTensor &got) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = want.getAsDouble(i), b = got.getAsDouble(i);
    diff += (a - b) * (a - b);
    norm += a * a;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// want and got agree: same dtype and shape, floats within `bound`
/// normwise, integers exactly.
testing::AssertionResult closeTo(const HostTensor &want, const HostTensor &got,
                                 double bound) {
  if (want.dtype() != got.dtype() || want.shape() != got.shape())
    return testing::AssertionFailure()
           << rt::dtypeName(got.dtype()) << rt::shapeToString(got.shape())
           << ", expected " << rt::dtypeName(want.dtype())
           << rt::shapeToString(want.shape());
  if (!rt::isFloat(want.dtype()))
    return want.bitwiseEqual(got)
               ? testing::AssertionSuccess()
               : testing::AssertionFailure() << "integers differ";
  double e = relativeError(want, got);
  if (!(e <= bound))
    return testing::AssertionFailure()
           << "relative error " << e << " > " << bound;
  return testing::AssertionSuccess();
}

/// Rows [r*B/n, (r+1)*B/n) of `t` (leading dim B).
HostTensor rowsOf(const HostTensor &t, int64_t r, int64_t n) {
  Shape shape = t.shape();
  EXPECT_GE(shape.size(), 1u);
  EXPECT_EQ(shape[0] % n, 0);
  int64_t rows = shape[0] / n;
  size_t rowBytes = t.byteSize() / static_cast<size_t>(shape[0]);
  shape[0] = rows;
  HostTensor out(t.dtype(), shape);
  std::memcpy(out.raw(),
              static_cast<const uint8_t *>(t.raw()) +
                  rowBytes * static_cast<size_t>(r * rows),
              out.byteSize());
  return out;
}

std::string kindOf(FuncOp f, unsigned i) {
  auto k = f.getArgAttrOfType<mlir::StringAttr>(i, "step.kind");
  return k ? k.getValue().str() : "";
}

std::optional<Shape> fullShapeOf(mlir::DenseI64ArrayAttr a) {
  if (!a)
    return std::nullopt;
  return Shape(a.asArrayRef().begin(), a.asArrayRef().end());
}
std::optional<Shape> argFullShape(FuncOp f, unsigned i) {
  return fullShapeOf(
      f.getArgAttrOfType<mlir::DenseI64ArrayAttr>(i, "step.full_shape"));
}
std::optional<Shape> resultFullShape(FuncOp f, unsigned r) {
  return fullShapeOf(
      f.getResultAttrOfType<mlir::DenseI64ArrayAttr>(r, "step.full_shape"));
}

HostTensor zerosOf(mlir::Type type) {
  auto t = mlir::cast<mlir::RankedTensorType>(type);
  return HostTensor(*toDType(t.getElementType()),
                    Shape(t.getShape().begin(), t.getShape().end()));
}

/// Deterministic global inputs of `f` by name: floats in [-1, 1], integers
/// in [0, classes).
std::map<std::string, HostTensor> globalInputs(FuncOp f, int64_t classes) {
  std::map<std::string, HostTensor> inputs;
  uint64_t lcg = 2024;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (kindOf(f, i) != "input")
      continue;
    HostTensor t = zerosOf(f.getArgumentTypes()[i]);
    for (int64_t k = 0; k < t.numel(); ++k) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      uint64_t bits = lcg >> 33;
      t.setFromDouble(k, rt::isFloat(t.dtype())
                             ? static_cast<double>(bits % 2001) / 1000 - 1
                             : static_cast<double>(bits % classes));
    }
    inputs[argumentName(f, i)] = std::move(t);
  }
  return inputs;
}

/// Rank r's first arguments of `f` (a step for `n` ranks): params (their
/// block where sharded), zero state of the argument's (block) type, and
/// its rows of the global inputs.
std::vector<HostTensor>
rankArgs(FuncOp f, const std::map<std::string, HostTensor> &params,
         const std::map<std::string, HostTensor> &inputs, int64_t r,
         int64_t n) {
  std::vector<HostTensor> args;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    std::string name = argumentName(f, i), kind = kindOf(f, i);
    if (kind == "param") {
      const HostTensor &full = params.at(name);
      if (auto shape = argFullShape(f, i)) {
        EXPECT_EQ(*shape, full.shape()) << name;
        args.push_back(rt::shardOf(full, r, n));
      } else {
        args.push_back(full);
      }
    } else if (kind == "input") {
      args.push_back(rowsOf(inputs.at(name), r, n));
    } else {
      args.push_back(zerosOf(f.getArgumentTypes()[i]));
    }
    HostTensor want = zerosOf(f.getArgumentTypes()[i]);
    EXPECT_EQ(args.back().shape(), want.shape()) << name;
    EXPECT_EQ(args.back().dtype(), want.dtype()) << name;
  }
  return args;
}

/// Whether two name -> tensor maps hold the same names and bits.
void expectSameParams(const std::map<std::string, HostTensor> &a,
                      const std::map<std::string, HostTensor> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name;
    EXPECT_TRUE(t.bitwiseEqual(it->second)) << name;
  }
}

TrainOptions sgdOptions(const std::string &mode = "none", int64_t world = 1) {
  TrainOptions t;
  t.optimizer = OptimizerOptions::parse("sgd,lr=0.1,momentum=0.9");
  t.clipNorm = 0.5;
  t.shard = ShardOptions::parse(mode, world);
  return t;
}

/// The MLP of TrainStepTestUtil's sizes at `batch` rows.
Model mlpAt(int64_t batch) {
  trace::Graph g(3);
  mlp::Sizes s;
  s.in = 12, s.hidden1 = 16, s.hidden2 = 8, s.classes = 5, s.batch = batch;
  mlp::traceMLP(g, s);
  return {g.mlir(), g.initialParams(), s.classes};
}

/// The tiny GPT-2 (context 16) at `batch` sequences.
Model gpt2At(int64_t batch) {
  gpt2::GPT2Config cfg;
  cfg.vocab = 32, cfg.context = 16, cfg.layers = 2, cfg.heads = 2,
  cfg.width = 16, cfg.batch = batch;
  return tracedGPT2(cfg, 5);
}

/// A regression with params smaller than the world (a [3] `w`, a [1]
/// `bias`, and a `scale` of shape `scaleShape`: {} for a rank-0 param, as a
/// learnable temperature): on 4 ranks some blocks hold padding only.
/// Inputs x [batch, 3], y [batch].
Model regressionAt(int64_t batch, const Shape &scaleShape) {
  using namespace step::trace;
  Graph g(11);
  Tensor x = g.input("x", {batch, 3});
  Tensor y = g.input("y", {batch});
  Tensor scale = g.param("scale", scaleShape, init::constant(0.75));
  Tensor w = g.param("w", {3}, init::uniform(-1, 1));
  Tensor bias = g.param("bias", {1}, init::constant(0.25));
  Tensor pred = sum(x * w, {1}) * scale + bias;
  Tensor d = pred - y;
  g.output(mean(d * d));
  return {g.mlir(), g.initialParams(), 1};
}
Model smallParamsAt(int64_t batch) { return regressionAt(batch, {1}); }
Model scalarParamAt(int64_t batch) { return regressionAt(batch, {}); }

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

// all_reduce over 3 threads, per dtype and op, in place and not, against
// sums, maxima and minima worked out by hand; every rank gets them.
TEST(ThreadGroup, AllReducePerDtypeAndOp) {
  auto ranks = rt::makeThreadGroup(3);
  ASSERT_EQ(ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->rank(), r);
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->size(), 3);
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->kind(), "threads");
  }
  // Per rank r: f32 {r + 0.5, -r, 10 r}, i32 {7 r - 3, 100 - r},
  // i64 {r 2^40, -r}, i1 {r == 1, 1, 0}.
  struct Got {
    std::vector<float> f32[3];
    std::vector<int32_t> i32[3];
    std::vector<int64_t> i64[3];
    std::vector<uint8_t> i1[2];
    std::string i1SumError;
  };
  std::vector<Got> got(3);
  const CommOp ops[3] = {CommOp::Sum, CommOp::Max, CommOp::Min};
  onRanks(ranks, [&](int r) {
    rt::Communicator &c = rt::currentCommunicator();
    EXPECT_EQ(&c, ranks[static_cast<size_t>(r)].get());
    Got &g = got[static_cast<size_t>(r)];
    for (int k = 0; k < 3; ++k) {
      std::vector<float> f = {r + 0.5f, static_cast<float>(-r),
                              10.0f * static_cast<float>(r)};
      g.f32[k].resize(3);
      c.allReduce(f.data(), g.f32[k].data(), 3, DType::F32, ops[k]);
      std::vector<int32_t> i = {7 * r - 3, 100 - r};
      c.allReduce(i.data(), i.data(), 2, DType::I32, ops[k]); // in place
      g.i32[k] = i;
      std::vector<int64_t> l = {static_cast<int64_t>(r) << 40, -r};
      g.i64[k].resize(2);
      c.allReduce(l.data(), g.i64[k].data(), 2, DType::I64, ops[k]);
    }
    for (int k = 0; k < 2; ++k) {
      std::vector<uint8_t> b = {static_cast<uint8_t>(r == 1), 1, 0};
      g.i1[k].resize(3);
      c.allReduce(b.data(), g.i1[k].data(), 3, DType::I1,
                  k == 0 ? CommOp::Max : CommOp::Min);
    }
    // i1 has no sum (every rank throws alike).
    std::vector<uint8_t> b = {1};
    try {
      c.allReduce(b.data(), b.data(), 1, DType::I1, CommOp::Sum);
    } catch (const rt::Error &e) {
      g.i1SumError = e.what();
    }
  });
  const std::vector<float> f32[3] = {
      {4.5f, -3, 30}, {2.5f, 0, 20}, {0.5f, -2, 0}};
  const std::vector<int32_t> i32[3] = {{12, 297}, {11, 100}, {-3, 98}};
  const std::vector<int64_t> i64[3] = {
      {int64_t(3) << 40, -3}, {int64_t(2) << 40, 0}, {0, -2}};
  const std::vector<uint8_t> i1[2] = {{1, 1, 0}, {0, 1, 0}};
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Got &g = got[static_cast<size_t>(r)];
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("op " + std::to_string(k));
      EXPECT_EQ(g.f32[k], f32[k]);
      EXPECT_EQ(g.i32[k], i32[k]);
      EXPECT_EQ(g.i64[k], i64[k]);
    }
    EXPECT_EQ(g.i1[0], i1[0]);
    EXPECT_EQ(g.i1[1], i1[1]);
    EXPECT_NE(g.i1SumError.find("max or min"), std::string::npos)
        << g.i1SumError;
  }
}

// all_gather concatenates in rank order; broadcast copies root 1's bytes
// to every rank. Collectives run one after another on the same group.
TEST(ThreadGroup, AllGatherAndBroadcast) {
  auto ranks = rt::makeThreadGroup(3);
  std::vector<std::vector<int32_t>> gathered(3), broadcast(3);
  onRanks(ranks, [&](int r) {
    rt::Communicator &c = rt::currentCommunicator();
    for (int round = 0; round < 2; ++round) {
      std::vector<int32_t> mine = {10 * r + round, 10 * r + 1 + round};
      std::vector<int32_t> all(6, -1);
      c.allGather(mine.data(), all.data(), 2 * sizeof(int32_t));
      if (round == 1)
        gathered[static_cast<size_t>(r)] = all;
      std::vector<int32_t> data = {100 * r + round, 100 * r + 7 + round};
      c.broadcast(data.data(), 2 * sizeof(int32_t), 1);
      if (round == 1)
        broadcast[static_cast<size_t>(r)] = data;
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(gathered[static_cast<size_t>(r)],
              (std::vector<int32_t>{1, 2, 11, 12, 21, 22}))
        << "rank " << r;
    EXPECT_EQ(broadcast[static_cast<size_t>(r)],
              (std::vector<int32_t>{101, 108}))
        << "rank " << r;
  }
}

// groupOf on 4 threads: replica groups of 2 split the ranks ({0,1},
// {2,3}); an all_reduce sums only the group's members. A second partition
// ({0,2}, {1,3}) gets groups of its own; asking again gives the same
// communicator; the identity groups are the communicator itself.
TEST(ThreadGroup, SubgroupsOfReplicaGroups) {
  auto ranks = rt::makeThreadGroup(4);
  std::vector<float> consecutive(4), strided(4), again(4);
  std::vector<int> sizes(4), positions(4), stridedPositions(4);
  std::atomic<int> sameTwice{0}, identity{0};
  onRanks(ranks, [&](int r) {
    rt::Communicator &c = rt::currentCommunicator();
    auto i = static_cast<size_t>(r);
    rt::Communicator &g =
        rt::groupOf(c, rt::ReplicaGroups{2, {0, 1, 2, 3}}, "test");
    sizes[i] = g.size();
    positions[i] = g.rank();
    float v = static_cast<float>(r + 1);
    g.allReduce(&v, &consecutive[i], 1, DType::F32, CommOp::Sum);
    rt::Communicator &s =
        rt::groupOf(c, rt::ReplicaGroups{2, {0, 2, 1, 3}}, "test");
    stridedPositions[i] = s.rank();
    s.allReduce(&v, &strided[i], 1, DType::F32, CommOp::Sum);
    rt::Communicator &g2 =
        rt::groupOf(c, rt::ReplicaGroups{2, {0, 1, 2, 3}}, "test");
    sameTwice += &g2 == &g;
    g2.allReduce(&v, &again[i], 1, DType::F32, CommOp::Max);
    identity +=
        &rt::groupOf(c, rt::ReplicaGroups{4, {0, 1, 2, 3}}, "test") == &c;
  });
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(positions, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(consecutive, (std::vector<float>{3, 3, 7, 7}));
  EXPECT_EQ(stridedPositions, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(strided, (std::vector<float>{4, 6, 4, 6}));
  EXPECT_EQ(again, (std::vector<float>{2, 2, 4, 4}));
  EXPECT_EQ(sameTwice.load(), 4);
  EXPECT_EQ(identity.load(), 4);
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const rt::Error &e) {
    return e.what();
  }
  return "";
}

// groupOf refuses replica groups of another world size (saying how to
// launch it) and a group size that does not divide them.
TEST(ThreadGroup, GroupOfChecksTheWorldSize) {
  std::string e = errorOf([] {
    rt::groupOf(rt::selfCommunicator(), rt::ReplicaGroups{2, {0, 1}},
                "all_reduce");
  });
  EXPECT_NE(e.find("mpirun -np 2"), std::string::npos) << e;
  EXPECT_NE(e.find("all_reduce"), std::string::npos) << e;
  auto ranks = rt::makeThreadGroup(3);
  e = errorOf([&] {
    rt::groupOf(*ranks[0], rt::ReplicaGroups{4, {0, 1, 2, 3}}, "all_gather");
  });
  EXPECT_NE(e.find("mpirun -np 4"), std::string::npos) << e;
  e = errorOf([&] {
    rt::groupOf(*ranks[0], rt::ReplicaGroups{2, {0, 1, 2}}, "all_gather");
  });
  EXPECT_NE(e.find("does not divide"), std::string::npos) << e;
  EXPECT_ANY_THROW(rt::makeThreadGroup(0));
  // The self communicator: every collective is the identity.
  rt::Communicator &self = rt::selfCommunicator();
  EXPECT_EQ(self.size(), 1);
  EXPECT_EQ(&rt::currentCommunicator(), &self);
  float in[2] = {1.5f, -2}, out[2] = {0, 0};
  self.allReduce(in, out, 2, DType::F32, CommOp::Sum);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
}

//===----------------------------------------------------------------------===//
// shardOf / unshard
//===----------------------------------------------------------------------===//

// A [5, 3] tensor (1..15) in 2 blocks of 8 and 4 blocks of 4, the last
// zero-padded; unshard gives it back. A [2] tensor in 4 blocks of 1: the
// blocks past its end are all padding.
TEST(ShardOf, BlocksAndRoundTrip) {
  std::vector<double> v;
  for (int i = 1; i <= 15; ++i)
    v.push_back(i);
  HostTensor full = tensorOf(DType::F32, {5, 3}, v);
  const std::vector<std::vector<double>> two = {{1, 2, 3, 4, 5, 6, 7, 8},
                                                {9, 10, 11, 12, 13, 14, 15, 0}};
  const std::vector<std::vector<double>> four = {
      {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 0}};
  for (const auto *want : {&two, &four}) {
    auto count = static_cast<int64_t>(want->size());
    SCOPED_TRACE(std::to_string(count) + " blocks");
    std::vector<HostTensor> blocks;
    for (int64_t i = 0; i < count; ++i) {
      blocks.push_back(rt::shardOf(full, i, count));
      EXPECT_EQ(blocks.back().dtype(), DType::F32);
      EXPECT_EQ(blocks.back().shape(), (Shape{15 / count + 1}));
      EXPECT_EQ(valuesOf(blocks.back()), (*want)[static_cast<size_t>(i)]);
    }
    HostTensor back = rt::unshard(blocks, {5, 3});
    EXPECT_TRUE(back.bitwiseEqual(full));
  }
  HostTensor small = tensorOf(DType::I64, {2}, std::vector<double>{7, -9});
  std::vector<HostTensor> blocks;
  for (int64_t i = 0; i < 4; ++i)
    blocks.push_back(rt::shardOf(small, i, 4));
  EXPECT_EQ(valuesOf(blocks[0]), std::vector<double>{7});
  EXPECT_EQ(valuesOf(blocks[1]), std::vector<double>{-9});
  EXPECT_EQ(valuesOf(blocks[2]), std::vector<double>{0});
  EXPECT_EQ(valuesOf(blocks[3]), std::vector<double>{0});
  EXPECT_TRUE(rt::unshard(blocks, {2}).bitwiseEqual(small));
  EXPECT_THROW(rt::shardOf(full, 2, 2), rt::Error);
  EXPECT_THROW(rt::shardOf(full, -1, 2), rt::Error);
}

// unshard refuses a block of the wrong size or dtype, naming what it
// expected.
TEST(ShardOf, UnshardRejectsWrongBlocks) {
  HostTensor a(DType::F32, {8}), b(DType::F32, {7});
  std::string e = errorOf([&] { rt::unshard({a, b}, {5, 3}); });
  EXPECT_NE(e.find("block 1"), std::string::npos) << e;
  EXPECT_NE(e.find("[8]"), std::string::npos) << e;
  // Blocks of 4 for 2 blocks of [5, 3] (which needs 8).
  HostTensor c(DType::F32, {4});
  EXPECT_THROW(rt::unshard({c, c}, {5, 3}), rt::Error);
  HostTensor d(DType::I32, {8});
  EXPECT_THROW(rt::unshard({a, d}, {5, 3}), rt::Error);
  EXPECT_THROW(rt::unshard({}, {5, 3}), rt::Error);
}

//===----------------------------------------------------------------------===//
// CPU kernels of the collective ops
//===----------------------------------------------------------------------===//

const rt::ReplicaGroups kPair{2, {0, 1}};

// all_reduce "mean" of bf16 on 2 ranks: reduced in f32 and rounded once
// to bf16 (the expected values are the exact means rounded to bf16); max
// and min of f32 as well.
TEST(CollectiveKernels, AllReduceMeanOfBf16) {
  const std::vector<double> a = {1.0, 3.0, -2.0, 0.1, 1.0, 300.0},
                            b = {2.0, 5.0, 2.0, 0.2, 1.0078125, -7.5};
  std::vector<HostTensor> mean(2), max(2), min(2);
  auto ranks = rt::makeThreadGroup(2);
  onRanks(ranks, [&](int r) {
    auto i = static_cast<size_t>(r);
    HostTensor x = tensorOf(DType::BF16, {2, 3}, r == 0 ? a : b);
    mean[i] = rt::cpu::allReduce(x, "mean", kPair);
    HostTensor y = tensorOf(DType::F32, {6}, r == 0 ? a : b);
    max[i] = rt::cpu::allReduce(y, "max", kPair);
    min[i] = rt::cpu::allReduce(y, "min", kPair);
  });
  HostTensor bfA = tensorOf(DType::BF16, {2, 3}, a),
             bfB = tensorOf(DType::BF16, {2, 3}, b);
  HostTensor want(DType::BF16, {2, 3});
  for (int64_t k = 0; k < 6; ++k)
    want.setFromDouble(k, (bfA.getAsDouble(k) + bfB.getAsDouble(k)) / 2);
  // By hand: 1.5, 4, 0, ~0.15, 1.00390625 -> 1 (a tie between 1 and
  // 1 + 2^-7, to even), 146.25 -> 146 (bf16 steps by 1 in [128, 256)).
  for (int64_t k : {0, 1, 2, 4, 5})
    EXPECT_EQ(
        want.getAsDouble(k),
        (std::vector<double>{1.5, 4, 0, 0, 1, 146})[static_cast<size_t>(k)]);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const HostTensor &m = mean[static_cast<size_t>(r)];
    EXPECT_EQ(m.dtype(), DType::BF16);
    EXPECT_EQ(m.shape(), (Shape{2, 3}));
    EXPECT_TRUE(sameBits({want}, {m}, {"mean"}));
    EXPECT_EQ(valuesOf(max[static_cast<size_t>(r)]),
              (std::vector<double>{2, 5, 2, 0.2f, 1.0078125, 300}));
    EXPECT_EQ(valuesOf(min[static_cast<size_t>(r)]),
              (std::vector<double>{1, 3, -2, 0.1f, 1, -7.5}));
  }
}

// reduce_scatter: rank r keeps rows [2r, 2r + 2) of the [4, 3] sum (and
// mean); all_gather concatenates along dim 0 in rank order; local_shard is
// shardOf at the rank; a dim 0 the group does not divide is an error.
TEST(CollectiveKernels, ReduceScatterAllGatherLocalShard) {
  std::vector<HostTensor> sum(2), mean(2), gathered(2), local(2);
  std::vector<std::string> notDivisible(2);
  HostTensor shared = tensorOf(
      DType::F32, {5, 3},
      std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  auto ranks = rt::makeThreadGroup(2);
  onRanks(ranks, [&](int r) {
    auto i = static_cast<size_t>(r);
    std::vector<double> v;
    for (int k = 0; k < 12; ++k)
      v.push_back(k + 100 * r); // rank 0: 0..11, rank 1: 100..111
    HostTensor x = tensorOf(DType::F32, {4, 3}, v);
    sum[i] = rt::cpu::reduceScatter(x, "sum", kPair);
    mean[i] = rt::cpu::reduceScatter(x, "mean", kPair);
    HostTensor row = tensorOf(DType::I64, {1, 2},
                              std::vector<double>{10.0 * r, 10.0 * r + 1});
    gathered[i] = rt::cpu::allGather(row, kPair);
    local[i] = rt::cpu::localShard(shared, kPair);
    notDivisible[i] = errorOf([&] {
      rt::cpu::reduceScatter(HostTensor(DType::F32, {3}), "sum", kPair);
    });
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    auto i = static_cast<size_t>(r);
    std::vector<double> s, m;
    for (int k = 6 * r; k < 6 * r + 6; ++k) {
      s.push_back(2 * k + 100);
      m.push_back(k + 50);
    }
    EXPECT_EQ(sum[i].shape(), (Shape{2, 3}));
    EXPECT_EQ(valuesOf(sum[i]), s);
    EXPECT_EQ(valuesOf(mean[i]), m);
    EXPECT_EQ(gathered[i].shape(), (Shape{2, 2}));
    EXPECT_EQ(valuesOf(gathered[i]), (std::vector<double>{0, 1, 10, 11}));
    EXPECT_TRUE(sameBits({rt::shardOf(shared, r, 2)}, {local[i]}, {"local"}));
    EXPECT_EQ(valuesOf(local[i]),
              r == 0 ? (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8})
                     : (std::vector<double>{9, 10, 11, 12, 13, 14, 15, 0}));
    EXPECT_NE(notDivisible[i].find("not divisible"), std::string::npos)
        << notDivisible[i];
  }
}

//===----------------------------------------------------------------------===//
// The pass: N ranks on their rows == one process on the whole batch
//===----------------------------------------------------------------------===//

struct ShardCase {
  std::string name;
  Model (*model)(int64_t batch);
  int64_t globalBatch;
  std::string spec; ///< --shard
  int64_t world;
  bool clip = true; ///< clip to 0.5 (else no clipping)
  /// Gradient collectives expected: one bucket for all (the default 25 MiB
  /// holds these models' gradients), one per gradient, or several.
  enum Buckets { One, PerGradient, Several } buckets = One;
  /// Changes to both steps' options (optimizer, accumulation, ...).
  void (*tweak)(TrainOptions &) = nullptr;
  double bound = 1e-5;
  /// The float inputs of the last rank's rows times this (1e4 with fp16:
  /// that rank's gradients overflow, so every rank must skip the update).
  double lastRowsScale = 1;
};
void PrintTo(const ShardCase &c, std::ostream *os) { *os << c.name; }

class ShardDiff : public testing::TestWithParam<ShardCase> {};

TEST_P(ShardDiff, MatchesOneProcess) {
  const ShardCase &c = GetParam();
  const int64_t n = c.world, B = c.globalBatch;
  ASSERT_EQ(B % n, 0);
  Model global = c.model(B), local = c.model(B / n);
  // Traced at two batch sizes from one seed: the same params.
  expectSameParams(global.params, local.params);
  auto ctx = makeContext();
  TrainOptions plain = sgdOptions(), sharded = sgdOptions(c.spec, n);
  if (!c.clip)
    plain.clipNorm.reset(), sharded.clipNorm.reset();
  if (c.tweak)
    c.tweak(plain), c.tweak(sharded);
  const std::string mode = sharded.shard.mode;
  BuiltStep want = buildStep(ctx.get(), global, plain);
  ASSERT_TRUE(want.module) << want.errors;
  BuiltStep got = buildStep(ctx.get(), local, sharded);
  ASSERT_TRUE(got.module) << got.errors;
  FuncOp f = want.step(), g = got.step();
  ASSERT_FALSE(f->hasAttr("step.shard"));
  auto shard = g->getAttrOfType<mlir::DictionaryAttr>("step.shard");
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard.getAs<mlir::StringAttr>("mode").getValue().str(), mode);
  EXPECT_EQ(BuiltStep::intOf(shard, "world_size"), n);

  // The signature: the same arguments by name; state (zero1-3) and params
  // (zero3) are blocks of ceil(numel / n) elements of their full shape.
  ASSERT_EQ(f.getNumArguments(), g.getNumArguments());
  int64_t shardedState = 0;
  for (unsigned i = 0; i < g.getNumArguments(); ++i) {
    std::string name = argumentName(g, i), kind = kindOf(g, i);
    SCOPED_TRACE(name);
    ASSERT_EQ(name, argumentName(f, i));
    HostTensor full = zerosOf(f.getArgumentTypes()[i]);
    HostTensor mine = zerosOf(g.getArgumentTypes()[i]);
    std::optional<Shape> fullShape = argFullShape(g, i);
    // An optimizer slot: opt.<slot>.<param> (not opt.step, amp.*).
    bool slot = false;
    for (const auto &p : global.params)
      slot =
          slot || (name.rfind("opt.", 0) == 0 && name.size() > p.first.size() &&
                   name.compare(name.size() - p.first.size() - 1,
                                std::string::npos, "." + p.first) == 0);
    EXPECT_EQ(slot, kind == "state" && name.rfind("opt.", 0) == 0 &&
                        name != "opt.step");
    bool blocks =
        (kind == "param" && mode == "zero3") || (slot && mode != "dp");
    ASSERT_EQ(fullShape.has_value(), blocks);
    if (blocks) {
      EXPECT_EQ(*fullShape, full.shape());
      EXPECT_EQ(mine.shape(), (Shape{(full.numel() + n - 1) / n}));
      shardedState += kind == "state";
    } else if (kind == "input") {
      Shape rows = full.shape();
      rows[0] /= n;
      EXPECT_EQ(mine.shape(), rows);
    } else {
      EXPECT_EQ(mine.shape(), full.shape());
    }
  }
  if (mode != "dp") {
    // Every slot of every param (SGD with momentum: 1, AdamW: 2).
    int64_t slots =
        sharded.optimizer.kind == OptimizerOptions::Kind::Adamw ? 2 : 1;
    EXPECT_EQ(shardedState, slots * static_cast<int64_t>(global.params.size()));
  }
  // The step.shard figures: ZeRO's per-rank bytes, from the params (all
  // f32; one slot per param for SGD with momentum, two for AdamW; opt.step
  // is 8 bytes and stays whole).
  if (!c.tweak || sharded.optimizer.kind == OptimizerOptions::Kind::Adamw) {
    int64_t full = 0, blockBytes = 0;
    for (const auto &[name, t] : global.params) {
      full += 4 * t.numel();
      blockBytes += 4 * ((t.numel() + n - 1) / n);
    }
    int64_t slots =
        sharded.optimizer.kind == OptimizerOptions::Kind::Adamw ? 2 : 1;
    bool zero = mode != "dp";
    bool scatter = mode == "zero2" || mode == "zero3";
    EXPECT_EQ(BuiltStep::intOf(shard, "params_bytes_full"), full);
    EXPECT_EQ(BuiltStep::intOf(shard, "grads_bytes_full"), full);
    EXPECT_EQ(BuiltStep::intOf(shard, "state_bytes_full"), slots * full + 8);
    EXPECT_EQ(BuiltStep::intOf(shard, "params_bytes"),
              mode == "zero3" ? blockBytes : full);
    EXPECT_EQ(BuiltStep::intOf(shard, "grads_bytes"),
              scatter ? blockBytes : full);
    EXPECT_EQ(BuiltStep::intOf(shard, "state_bytes"),
              slots * (zero ? blockBytes : full) + 8);
  }
  // The gradients' collectives (mean): all_reduce for dp and zero1 (one
  // more for the loss), reduce_scatter for zero2 and zero3.
  int64_t collectives = 0;
  bool scatter = mode == "zero2" || mode == "zero3";
  g.walk([&](mlir::Operation *op) {
    auto reduce = op->getAttrOfType<mlir::StringAttr>("reduce");
    if (reduce && reduce.getValue() == "mean" &&
        op->getName().getStringRef() ==
            (scatter ? "step.reduce_scatter" : "step.all_reduce"))
      ++collectives;
  });
  if (!scatter)
    --collectives; // the loss
  auto params = static_cast<int64_t>(global.params.size());
  if (c.buckets == ShardCase::One)
    EXPECT_EQ(collectives, 1);
  else if (c.buckets == ShardCase::PerGradient)
    EXPECT_EQ(collectives, params);
  else
    EXPECT_TRUE(collectives > 1 && collectives < params)
        << collectives << " gradient collectives for " << params << " params";

  std::map<std::string, HostTensor> inputs = globalInputs(f, global.classes);
  if (c.lastRowsScale != 1)
    for (auto &[name, t] : inputs)
      if (rt::isFloat(t.dtype()))
        for (int64_t k = t.numel() / n * (n - 1); k < t.numel(); ++k)
          t.setFromDouble(k, t.getAsDouble(k) * c.lastRowsScale);
  auto ranks = rt::makeThreadGroup(static_cast<int>(n));
  std::map<std::string, unsigned> wantResult;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    wantResult[resultName(f, r)] = r;

  /// Two updates: `want` on the global batch, `rank` on each rank's rows
  /// (on its own thread, its communicator installed), compared.
  using RankRunner = std::function<std::vector<HostTensor>(
      int, const std::vector<HostTensor> &)>;
  auto compareRuns = [&](const std::string &what, const StepRunner &wantRun,
                         const RankRunner &rankRun) {
    SCOPED_TRACE(what);
    std::vector<HostTensor> wantArgs = rankArgs(f, global.params, inputs, 0, 1);
    std::vector<std::vector<HostTensor>> args(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r)
      args[static_cast<size_t>(r)] = rankArgs(g, local.params, inputs, r, n);
    for (int update = 0; update < 2; ++update) {
      SCOPED_TRACE("update " + std::to_string(update));
      std::vector<HostTensor> w = wantRun(wantArgs);
      ASSERT_FALSE(w.empty());
      if (c.lastRowsScale != 1) {
        // The overflow is real: one process skips the update.
        for (unsigned k = 1; k < f.getNumResults(); ++k)
          for (unsigned i = 0; i < f.getNumArguments(); ++i) {
            if (kindOf(f, i) == "param" &&
                argumentName(f, i) == resultName(f, k)) {
              EXPECT_TRUE(w[k].bitwiseEqual(wantArgs[i]))
                  << resultName(f, k) << " changed";
            }
          }
      } else {
        ASSERT_TRUE(std::isfinite(w[0].getAsDouble(0)));
      }
      std::vector<std::vector<HostTensor>> out(static_cast<size_t>(n));
      onRanks(ranks, [&](int r) {
        out[static_cast<size_t>(r)] = rankRun(r, args[static_cast<size_t>(r)]);
      });
      for (const auto &o : out)
        ASSERT_EQ(o.size(), g.getNumResults());

      // Every param and state result, and the loss, against one process;
      // per-rank outputs (the MLP's logits) are the rank's rows of the
      // global ones.
      int64_t compared = 0;
      for (unsigned k = 0; k < g.getNumResults(); ++k) {
        std::string name = resultName(g, k);
        SCOPED_TRACE(name);
        ASSERT_TRUE(wantResult.count(name));
        const HostTensor &expected = w[wantResult[name]];
        bool replaces = name == "loss";
        for (unsigned i = 0; i < g.getNumArguments(); ++i)
          replaces = replaces || argumentName(g, i) == name;
        if (!replaces) {
          for (int64_t r = 0; r < n; ++r)
            EXPECT_TRUE(closeTo(rowsOf(expected, r, n),
                                out[static_cast<size_t>(r)][k], c.bound))
                << "rank " << r;
          continue;
        }
        HostTensor value;
        if (std::optional<Shape> shape = resultFullShape(g, k)) {
          EXPECT_EQ(*shape, expected.shape());
          std::vector<HostTensor> blocks;
          for (const auto &o : out)
            blocks.push_back(o[k]);
          value = rt::unshard(blocks, *shape);
        } else {
          // Replicated: the same bits on every rank.
          for (int64_t r = 1; r < n; ++r)
            EXPECT_TRUE(out[0][k].bitwiseEqual(out[static_cast<size_t>(r)][k]))
                << "rank " << r << " differs from rank 0";
          value = out[0][k];
        }
        EXPECT_TRUE(closeTo(expected, value, c.bound));
        ++compared;
      }
      // The loss, every param and every state tensor.
      EXPECT_EQ(compared,
                static_cast<int64_t>(f.getNumArguments() - inputs.size() + 1));
      wantArgs = nextArgs(f, wantArgs, w);
      for (int64_t r = 0; r < n; ++r)
        args[static_cast<size_t>(r)] = nextArgs(g, args[static_cast<size_t>(r)],
                                                out[static_cast<size_t>(r)]);
    }
  };

  // The interpreter. The IR is read by n threads at once: the context
  // locks its uniquers meanwhile.
  ctx->enableMultithreading(true);
  compareRuns("interpreter", interpreterOf(f),
              [&](int, const std::vector<HostTensor> &a) {
                return interpretOrFail(g, a);
              });
  ctx->disableMultithreading();
  // The CPU backend: the planned artifacts (every rank its own copy).
  std::optional<rt::Artifact> plainArtifact =
      planOrFail(*want.module, "train_step");
  std::optional<rt::Artifact> shardArtifact =
      planOrFail(*got.module, "train_step");
  ASSERT_TRUE(plainArtifact && shardArtifact);
  std::vector<rt::Artifact> copies(static_cast<size_t>(n), *shardArtifact);
  compareRuns("CPU backend", cpuOf(plainArtifact),
              [&](int r, const std::vector<HostTensor> &a) {
                return rt::cpu::execute(copies[static_cast<size_t>(r)], a);
              });
}

const char *const kModes[] = {"dp", "zero1", "zero2", "zero3"};

std::vector<ShardCase> shardCases() {
  std::vector<ShardCase> cases;
  auto add = [&](const std::string &name, Model (*model)(int64_t),
                 const std::string &spec, int64_t world) -> ShardCase & {
    bool gpt2 = model == gpt2At;
    cases.push_back({name, model, gpt2 ? 4 : 8, spec, world});
    return cases.back();
  };
  // Every mode on 2 and 4 ranks: SGD with momentum, clipped to 0.5.
  for (int64_t world : {2, 4})
    for (const char *m : kModes) {
      std::string suffix = std::string("_") + m + "_" + std::to_string(world);
      add("MLP" + suffix, mlpAt, m, world);
      add("GPT2" + suffix, gpt2At, m, world);
    }
  // One collective per gradient instead of one bucket for all, and small
  // buckets (several per step).
  add("MLP_zero2_NoBucket_2", mlpAt, "zero2,bucket=0", 2).buckets =
      ShardCase::PerGradient;
  add("GPT2_dp_NoBucket_2", gpt2At, "dp,bucket=0", 2).buckets =
      ShardCase::PerGradient;
  add("GPT2_zero1_NoBucket_4", gpt2At, "zero1,bucket=0", 4).buckets =
      ShardCase::PerGradient;
  add("GPT2_zero3_NoBucket_4", gpt2At, "zero3,bucket=0", 4).buckets =
      ShardCase::PerGradient;
  add("GPT2_zero2_Bucket4KiB_2", gpt2At, "zero2,bucket=4KiB", 2).buckets =
      ShardCase::Several;
  add("GPT2_dp_Bucket4KiB_4", gpt2At, "dp,bucket=4KiB", 4).buckets =
      ShardCase::Several;
  // Without clipping the update scales with the gradient: a gradient
  // summed instead of averaged shows.
  add("MLP_dp_NoClip_2", mlpAt, "dp", 2).clip = false;
  add("MLP_zero3_NoClip_4", mlpAt, "zero3", 4).clip = false;
  add("GPT2_zero2_NoClip_2", gpt2At, "zero2", 2).clip = false;
  // Params of fewer elements than ranks (blocks of padding only), a world
  // of one, and a rank-0 param.
  for (const char *m : kModes) {
    add(std::string("Small_") + m + "_4", smallParamsAt, m, 4).clip = false;
    add(std::string("ScalarParam_") + m + "_2", scalarParamAt, m, 2);
  }
  add("Small_zero3_NoBucket_4", smallParamsAt, "zero3,bucket=0", 4).buckets =
      ShardCase::PerGradient;
  add("Small_zero2_World1", smallParamsAt, "zero2", 1);

  // The rest of the pipeline around step-shard, every mode on 2 ranks
  // (4 where noted).
  struct Variant {
    const char *name;
    void (*tweak)(TrainOptions &);
    bool mlp, gpt2;
    double bound;
    int64_t world = 2;
  };
  const Variant variants[] = {
      // AdamW, weight decay on matrices only (decided before sharding).
      // Adam divides each gradient element by its own RMS, so GPT-2's
      // near-zero gradients amplify the reordering (measured 3.6e-5).
      {"AdamW",
       [](TrainOptions &t) {
         t.optimizer =
             OptimizerOptions::parse("adamw,lr=1e-2,wd=0.1,wd_vectors=false");
       },
       true, true, 1e-4},
      {"Nesterov",
       [](TrainOptions &t) {
         t.optimizer = OptimizerOptions::parse(
             "sgd,lr=0.1,momentum=0.9,nesterov=1,wd=0.01");
       },
       false, true, 1e-5},
      {"Cosine",
       [](TrainOptions &t) {
         t.schedule = ScheduleOptions::parse("cosine,warmup=1,total=4");
       },
       true, false, 1e-5, 4},
      {"GradAccum2", [](TrainOptions &t) { t.gradAccum = 2; }, true, true,
       1e-5},
      // Mixed precision: each rank's weight gradients are rounded to
      // bf16/fp16 before the mean (2^-8 / 2^-11 relative), so the bound
      // only tells a correct mean from a wrong one (measured 3.9e-3 bf16,
      // 1.1e-3 fp16).
      {"Bf16",
       [](TrainOptions &t) { t.amp = AmpOptions::parse("bf16", "", "auto"); },
       true, false, 1e-2},
      {"Fp16",
       [](TrainOptions &t) {
         t.amp = AmpOptions::parse("fp16", "", "dynamic,init=1024");
       },
       true, true, 1e-2},
      {"RematMax", [](TrainOptions &t) { t.remat.mode = "max"; }, false, true,
       1e-5, 4},
      {"RematAuto", [](TrainOptions &t) { t.remat.mode = "auto"; }, false, true,
       1e-5},
      {"OffloadAll",
       [](TrainOptions &t) { t.offload = OffloadOptions::parse("all"); }, false,
       true, 1e-5},
      {"NoFuse", [](TrainOptions &t) { t.fuse = false; }, false, true, 1e-5},
  };
  for (const Variant &v : variants)
    for (const char *m : kModes) {
      std::string suffix =
          std::string("_") + v.name + "_" + m + "_" + std::to_string(v.world);
      for (bool gpt2 : {false, true}) {
        if (gpt2 ? !v.gpt2 : !v.mlp)
          continue;
        ShardCase &c = add((gpt2 ? "GPT2" : "MLP") + suffix,
                           gpt2 ? gpt2At : mlpAt, m, v.world);
        c.tweak = v.tweak;
        c.bound = v.bound;
      }
    }
  // fp16 gradients that overflow on the last rank only: check_finite is
  // all-reduced, so every rank skips the update, as one process does.
  for (const char *m : kModes) {
    ShardCase &c =
        add(std::string("MLP_Fp16OverflowOnOneRank_") + m + "_2", mlpAt, m, 2);
    c.tweak = [](TrainOptions &t) {
      t.amp = AmpOptions::parse("fp16", "", "dynamic,init=1024");
    };
    c.lastRowsScale = 1e4;
    c.bound = 1e-2;
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, ShardDiff, testing::ValuesIn(shardCases()),
                         [](const testing::TestParamInfo<ShardCase> &info) {
                           return info.param.name;
                         });

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

// --shard and --world-size: unknown modes, world sizes below 1 and a world
// size without a mode are refused; valid specs parse to their fields.
TEST(ShardErrors, OptionParsing) {
  EXPECT_THROW(ShardOptions::parse("zero4", 2), std::invalid_argument);
  EXPECT_THROW(ShardOptions::parse("dp", 0), std::invalid_argument);
  EXPECT_THROW(ShardOptions::parse("zero1", -2), std::invalid_argument);
  EXPECT_THROW(ShardOptions::parse("none", 2), std::invalid_argument);
  EXPECT_THROW(ShardOptions::parse("", 2), std::invalid_argument);
  EXPECT_THROW(ShardOptions::parse("zero2,foo=1", 2), std::invalid_argument);
  ShardOptions o = ShardOptions::parse("zero3", 4);
  EXPECT_EQ(o.mode, "zero3");
  EXPECT_EQ(o.worldSize, 4);
  EXPECT_EQ(o.bucketBytes, 25 << 20);
  o = ShardOptions::parse("zero2,bucket=0", 2);
  EXPECT_EQ(o.bucketBytes, 0);
  o = ShardOptions::parse("", 1);
  EXPECT_EQ(o.mode, "none");
  EXPECT_EQ(o.worldSize, 1);
}

// LAMB's trust ratio needs the norm of the whole param: ZeRO refuses it
// with a diagnostic; dp (whole params on every rank) takes it.
TEST(ShardErrors, LambCannotBeSharded) {
  Model model = mlpAt(4);
  auto ctx = makeContext();
  TrainOptions t = sgdOptions("zero1", 2);
  t.optimizer = OptimizerOptions::parse("lamb,lr=1e-3");
  BuiltStep b = buildStep(ctx.get(), model, t);
  EXPECT_FALSE(b.module);
  EXPECT_NE(b.errors.find("cannot shard LAMB"), std::string::npos) << b.errors;
  t.shard = ShardOptions::parse("dp", 2);
  BuiltStep dp = buildStep(ctx.get(), model, t);
  EXPECT_TRUE(dp.module) << dp.errors;
}

/// The artifact of `model` under `t`, with meta "shard" as stepc writes it.
std::optional<rt::Artifact> artifactOf(const Model &model,
                                       const TrainOptions &t) {
  auto ctx = makeContext();
  BuiltStep b = buildStep(ctx.get(), model, t);
  if (!b.module) {
    ADD_FAILURE() << b.errors;
    return std::nullopt;
  }
  nlohmann::json shard = describeShard(b.step());
  std::optional<rt::Artifact> a = planOrFail(*b.module, "train_step");
  if (a && !shard.is_null())
    a->meta["shard"] = shard;
  return a;
}

// A Session over a step compiled for 2 ranks, given no communicator (a
// world of one: not under mpirun), says so; a communicator of 2 ranks for
// an unsharded step is refused too.
TEST(ShardErrors, SessionWorldSizeMismatch) {
  std::optional<rt::Artifact> sharded =
      artifactOf(mlpAt(4), sgdOptions("zero2", 2));
  ASSERT_TRUE(sharded);
  ASSERT_TRUE(sharded->meta.contains("shard"));
  EXPECT_EQ(sharded->meta["shard"].value("world_size", int64_t(0)), 2);
  std::string e = errorOf([&] {
    Session s(*sharded, SessionOptions{Backend::Cpu, nullptr});
  });
  EXPECT_NE(e.find("compiled for 2 ranks"), std::string::npos) << e;
  auto three = rt::makeThreadGroup(3);
  e = errorOf([&] {
    Session s(*sharded, SessionOptions{Backend::Cpu, three[0].get()});
  });
  EXPECT_NE(e.find("compiled for 2 ranks"), std::string::npos) << e;
  std::optional<rt::Artifact> plain = artifactOf(mlpAt(8), sgdOptions());
  ASSERT_TRUE(plain);
  auto two = rt::makeThreadGroup(2);
  e = errorOf([&] {
    Session s(*plain, SessionOptions{Backend::Cpu, two[0].get()});
  });
  EXPECT_NE(e.find("not sharded"), std::string::npos) << e;
}

//===----------------------------------------------------------------------===//
// Sessions on a thread group
//===----------------------------------------------------------------------===//

/// The MLP's batch of `rows` for update `update`: x floats, y labels.
std::map<std::string, HostTensor> mlpBatch(int64_t rows, int update) {
  HostTensor x(DType::F32, {rows, 12}), y(DType::I64, {rows});
  for (int64_t k = 0; k < x.numel(); ++k)
    x.setFromDouble(k, std::sin(0.37 * static_cast<double>(k + 1) + update));
  for (int64_t k = 0; k < y.numel(); ++k)
    y.setFromDouble(k, static_cast<double>((3 * k + update) % 5));
  return {{"x", x}, {"y", y}};
}

/// One Session per rank of `ranks` over `artifact` (CPU backend), with the
/// full `params` loaded through set().
std::vector<std::unique_ptr<Session>>
openRanks(const rt::Artifact &artifact,
          const std::vector<std::unique_ptr<rt::Communicator>> &ranks,
          const std::map<std::string, HostTensor> &params) {
  std::vector<std::unique_ptr<Session>> sessions;
  for (const auto &comm : ranks) {
    sessions.push_back(std::make_unique<Session>(
        artifact, SessionOptions{Backend::Cpu, comm.get()}));
    for (const auto &[name, t] : params)
      sessions.back()->set(name, t);
  }
  return sessions;
}

// Two Sessions on a thread group of 2 (full params loaded through set(),
// which keeps the rank's block; each steps on its rows) against one
// unsharded Session on the global batch: the losses and gathered() params
// and state agree within 1e-5 for two steps; get() of a sharded tensor is
// the rank's block.
TEST(ShardSession, ThreadGroupMatchesOneSession) {
  const int64_t B = 8, n = 2;
  Model global = mlpAt(B), local = mlpAt(B / n);
  for (const char *mode : {"dp", "zero1", "zero2", "zero3"}) {
    SCOPED_TRACE(mode);
    std::optional<rt::Artifact> one = artifactOf(global, sgdOptions());
    std::optional<rt::Artifact> art = artifactOf(local, sgdOptions(mode, n));
    ASSERT_TRUE(one && art);
    Session single(*one, SessionOptions{Backend::Cpu, nullptr});
    for (const auto &[name, t] : global.params)
      single.set(name, t);
    auto ranks = rt::makeThreadGroup(static_cast<int>(n));
    std::vector<std::unique_ptr<Session>> sessions(static_cast<size_t>(n));
    onRanks(ranks, [&](int r) {
      auto s = std::make_unique<Session>(
          *art,
          SessionOptions{Backend::Cpu, ranks[static_cast<size_t>(r)].get()});
      EXPECT_EQ(s->rank(), r);
      EXPECT_EQ(s->worldSize(), n);
      for (const auto &[name, t] : local.params)
        s->set(name, t);
      sessions[static_cast<size_t>(r)] = std::move(s);
    });
    for (const auto &s : sessions)
      ASSERT_TRUE(s);
    std::vector<std::string> names = single.paramNames();
    for (const std::string &s : single.stateNames())
      names.push_back(s);

    for (int update = 0; update < 2; ++update) {
      SCOPED_TRACE("update " + std::to_string(update));
      std::map<std::string, HostTensor> batch = mlpBatch(B, update);
      double want = single.step(batch);
      std::vector<double> losses(static_cast<size_t>(n));
      std::vector<std::map<std::string, HostTensor>> gathered(
          static_cast<size_t>(n));
      std::vector<std::map<std::string, Shape>> mine(static_cast<size_t>(n));
      onRanks(ranks, [&](int r) {
        Session &s = *sessions[static_cast<size_t>(r)];
        std::map<std::string, HostTensor> rows;
        for (const auto &[name, t] : batch)
          rows[name] = rowsOf(t, r, n);
        losses[static_cast<size_t>(r)] = s.step(rows);
        for (const std::string &name : names) {
          gathered[static_cast<size_t>(r)][name] = s.gathered(name);
          mine[static_cast<size_t>(r)][name] = s.get(name).shape();
        }
      });
      for (int64_t r = 0; r < n; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        auto i = static_cast<size_t>(r);
        EXPECT_EQ(std::memcmp(&losses[i], &losses[0], sizeof(double)), 0);
        EXPECT_NEAR(losses[i], want, 1e-5 * std::fabs(want));
        for (const std::string &name : names) {
          SCOPED_TRACE(name);
          const HostTensor &full = single.get(name);
          ASSERT_TRUE(gathered[i].count(name));
          EXPECT_TRUE(closeTo(full, gathered[i][name], 1e-5));
          bool blocks = std::string(mode) == "zero3"
                            ? name != "opt.step"
                            : std::string(mode) != "dp" &&
                                  name.rfind("opt.momentum_buffer.", 0) == 0;
          EXPECT_EQ(mine[i][name],
                    blocks ? Shape{(full.numel() + n - 1) / n} : full.shape());
        }
      }
    }
  }
}

// Checkpoints of a sharded run, after a step (non-zero state): the full
// tensors save_params writes (rank 0, gathered) and the per-rank blocks
// save_shards writes both load, bit for bit, into one unsharded Session and
// into a sharded run on 4 ranks (resharding the blocks).
TEST(ShardSession, CheckpointsLoadIntoAnyWorldSize) {
  namespace fs = std::filesystem;
  Model global = mlpAt(8), half = mlpAt(4), quarter = mlpAt(2);
  for (const char *mode : {"zero1", "zero3"}) {
    SCOPED_TRACE(mode);
    std::optional<rt::Artifact> one = artifactOf(global, sgdOptions());
    std::optional<rt::Artifact> two = artifactOf(half, sgdOptions(mode, 2));
    std::optional<rt::Artifact> four = artifactOf(quarter, sgdOptions(mode, 4));
    ASSERT_TRUE(one && two && four);
    fs::path dir =
        fs::path(testing::TempDir()) / ("step_shard_ckpt_" + std::string(mode) +
                                        "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto ranks = rt::makeThreadGroup(2);
    auto sessions = openRanks(*two, ranks, half.params);
    std::vector<std::string> names = sessions[0]->paramNames();
    for (const std::string &s : sessions[0]->stateNames())
      names.push_back(s);
    std::map<std::string, HostTensor> batch = mlpBatch(8, 0);
    std::vector<std::map<std::string, HostTensor>> full(2);
    onRanks(ranks, [&](int r) {
      Session &s = *sessions[static_cast<size_t>(r)];
      std::map<std::string, HostTensor> rows;
      for (const auto &[name, t] : batch)
        rows[name] = rowsOf(t, r, 2);
      s.step(rows);
      for (const std::string &name : names)
        full[static_cast<size_t>(r)][name] = s.gathered(name);
      s.save_params((dir / "full").string());
      s.save_shards((dir / "shards").string());
    });
    ASSERT_TRUE(fs::exists(dir / "shards" / "shards.json"));
    ASSERT_TRUE(fs::is_directory(dir / "shards" / "rank1"));
    for (const char *which : {"full", "shards"}) {
      SCOPED_TRACE(which);
      Session single(*one, SessionOptions{Backend::Cpu, nullptr});
      single.load_params((dir / which).string());
      for (const std::string &name : names) {
        EXPECT_TRUE(sameBits({full[0][name]}, {single.get(name)}, {name}));
        EXPECT_TRUE(sameBits({full[0][name]}, {full[1][name]}, {name}));
      }
      auto ranks4 = rt::makeThreadGroup(4);
      std::vector<std::unique_ptr<Session>> s4;
      for (const auto &comm : ranks4)
        s4.push_back(std::make_unique<Session>(
            *four, SessionOptions{Backend::Cpu, comm.get()}));
      std::vector<std::map<std::string, HostTensor>> back(4);
      onRanks(ranks4, [&](int r) {
        Session &s = *s4[static_cast<size_t>(r)];
        s.load_params((dir / which).string());
        for (const std::string &name : names)
          back[static_cast<size_t>(r)][name] = s.gathered(name);
      });
      for (int r = 0; r < 4; ++r)
        for (const std::string &name : names)
          EXPECT_TRUE(sameBits({full[0][name]},
                               {back[static_cast<size_t>(r)][name]}, {name}))
              << "rank " << r << " of 4";
    }
    fs::remove_all(dir);
  }
}

} // namespace
