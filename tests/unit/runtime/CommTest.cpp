//===- CommTest.cpp - Communicators, ZeRO blocks, collective kernels ------===//
//
// The runtime under step-shard (runtime/Comm.h, runtime/cpu/Collectives.cpp):
//  - the thread-group and TCP communicators: all_reduce (sum, max, min per
//    dtype), all_gather, broadcast against values worked out by hand, the
//    same on every rank; subgroups and groupOf's checks (threads); the TCP
//    world's rendezvous errors and a rank that dies mid-collective;
//  - rt::shardOf / rt::unshard (ZeRO's flattened, zero-padded blocks);
//  - rt::tpSliceOf / rt::tpUnslice (tensor parallelism's parts along a dim,
//    in groups for fused weights);
//  - the CPU kernels of the four collective ops on a group of 2 threads.
// The pass itself is tested in tests/unit/compiler/ShardTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/runtime/CommTestUtil.h"

#include "runtime/Comm.h"
#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {
using namespace step;
using namespace step::test;
using rt::CommOp;
using rt::DType;
using rt::HostTensor;
using rt::Shape;

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

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

std::vector<std::unique_ptr<rt::Communicator>> groupOfKind(
    const std::string &kind, int n) {
  return kind == "tcp" ? makeTcpGroup(n) : rt::makeThreadGroup(n);
}

class Communicators : public testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Kinds, Communicators,
                         testing::Values("threads", "tcp"));

// all_reduce over 3 ranks, per dtype and op, in place and not, against
// sums, maxima and minima worked out by hand; every rank gets them.
TEST_P(Communicators, AllReducePerDtypeAndOp) {
  auto ranks = groupOfKind(GetParam(), 3);
  ASSERT_EQ(ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(ranks[static_cast<size_t>(r)]);
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->rank(), r);
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->size(), 3);
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->kind(), GetParam());
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
TEST_P(Communicators, AllGatherAndBroadcast) {
  auto ranks = groupOfKind(GetParam(), 3);
  for (const auto &r : ranks)
    ASSERT_TRUE(r);
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

// A TCP world whose ranks disagree: a rank that calls another collective
// than rank 0, then a rank that dies in the middle of a run. Every rank
// throws, naming what happened; nobody waits forever.
TEST(TcpWorld, MismatchedCallsAndDeadRanksStopEveryRank) {
  auto ranks = makeTcpGroup(3);
  for (const auto &r : ranks)
    ASSERT_TRUE(r);
  std::vector<std::string> errors(3);
  onRanksCatching(ranks, errors, [&](int r) {
    rt::Communicator &c = rt::currentCommunicator();
    float x = 1;
    if (r == 2)
      c.allGather(&x, &x, sizeof x); // rank 0 calls all_reduce
    else
      c.allReduce(&x, &x, 1, DType::F32, CommOp::Sum);
  });
  EXPECT_NE(errors[0].find("rank 2 called all_gather of 4 bytes where rank 0 "
                           "called all_reduce of 4 bytes"),
            std::string::npos)
      << errors[0];
  for (int r : {1, 2})
    EXPECT_NE(errors[static_cast<size_t>(r)].find(
                  "rank 0 closed its connection (it exited or died)"),
              std::string::npos)
        << "rank " << r << ": " << errors[static_cast<size_t>(r)];
  // A broken communicator refuses further collectives at once.
  float y = 0;
  EXPECT_NE(errorOf([&] {
              ranks[1]->allReduce(&y, &y, 1, DType::F32, CommOp::Sum);
            }).find("after an earlier failure"),
            std::string::npos);

  // Rank 1 dies (its communicator goes) while ranks 0 and 2 reduce.
  auto world = makeTcpGroup(3);
  for (const auto &r : world)
    ASSERT_TRUE(r);
  world[1].reset();
  std::vector<std::string> dead(3);
  std::vector<std::thread> threads;
  for (int r : {0, 2})
    threads.emplace_back([&, r] {
      dead[static_cast<size_t>(r)] = errorOf([&] {
        float z = 1;
        world[static_cast<size_t>(r)]->allReduce(&z, &z, 1, DType::F32,
                                                 CommOp::Sum);
      });
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_NE(dead[0].find("rank 1 closed its connection"), std::string::npos)
      << dead[0];
  // Rank 2 finds rank 0 gone when it sends or when it waits for the sum.
  EXPECT_NE(dead[2].find("rank 0 closed its connection"), std::string::npos)
      << dead[2];
}

// Joining: a rank that never comes (timeout naming it), world sizes that
// differ, nobody listening, a bad rank.
TEST(TcpWorld, RendezvousErrorsNameTheProblem) {
  int port = freePort();
  std::string lonely = errorOf([&] { rt::connectTcp(0, 2, loopback(port, 1)); });
  EXPECT_NE(lonely.find("rank 0 timed out after 1"), std::string::npos)
      << lonely;
  EXPECT_NE(lonely.find("waiting for rank(s) 1 to connect"), std::string::npos)
      << lonely;
  std::string noRoot = errorOf([&] { rt::connectTcp(1, 2, loopback(port, 1)); });
  EXPECT_NE(noRoot.find("rank 1 timed out after 1"), std::string::npos)
      << noRoot;
  EXPECT_NE(noRoot.find("connecting to rank 0 at 127.0.0.1:" +
                        std::to_string(port)),
            std::string::npos)
      << noRoot;
  EXPECT_NE(errorOf([&] { rt::connectTcp(2, 2, loopback(port)); })
                .find("rank 2 is not a rank of a world of 2"),
            std::string::npos);

  std::string root, peer;
  std::thread t([&] { root = errorOf([&] { rt::connectTcp(0, 2, loopback(port, 5)); }); });
  peer = errorOf([&] { rt::connectTcp(1, 3, loopback(port, 5)); });
  t.join();
  EXPECT_NE(root.find("rank 1 joined a world of 3 ranks, but rank 0's world "
                      "has 2"),
            std::string::npos)
      << root;
  EXPECT_FALSE(peer.empty());
}

// groupOf on 4 ranks (threads, and TCP's lockstep groups): replica
// groups of 2 split the ranks ({0,1}, {2,3}); an all_reduce sums only the
// group's members. A second partition ({0,2}, {1,3}) gets groups of its
// own, whose all_gather and broadcast stay in the group; asking again
// gives the same communicator; the identity groups are the communicator
// itself.
TEST_P(Communicators, SubgroupsOfReplicaGroups) {
  auto ranks = groupOfKind(GetParam(), 4);
  for (const auto &r : ranks)
    ASSERT_TRUE(r);
  std::vector<float> consecutive(4), strided(4), again(4);
  std::vector<std::vector<float>> gathered(4);
  std::vector<float> broadcast(4);
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
    gathered[i].resize(2);
    s.allGather(&v, gathered[i].data(), sizeof v);
    broadcast[i] = v;
    s.broadcast(&broadcast[i], sizeof v, 1);
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
  EXPECT_EQ(gathered, (std::vector<std::vector<float>>{
                          {1, 3}, {2, 4}, {1, 3}, {2, 4}}));
  EXPECT_EQ(broadcast, (std::vector<float>{3, 4, 3, 4}));
  EXPECT_EQ(again, (std::vector<float>{2, 2, 4, 4}));
  EXPECT_EQ(sameTwice.load(), 4);
  EXPECT_EQ(identity.load(), 4);
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
// tpSliceOf / tpUnslice
//===----------------------------------------------------------------------===//

/// 0, 1, ..., n - 1.
std::vector<double> iota(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(static_cast<double>(i));
  return v;
}

/// Each rank's part of `full` (values 0..numel-1) along `dim`, against the
/// parts written out by hand in `want` (rank order); the parts joined give
/// `full` back.
void expectParts(const Shape &shape, int64_t dim, int64_t groups,
                 const Shape &partShape,
                 const std::vector<std::vector<double>> &want) {
  HostTensor full = tensorOf(DType::F32, shape, iota(rt::numElements(shape)));
  auto count = static_cast<int64_t>(want.size());
  std::vector<HostTensor> parts;
  for (int64_t t = 0; t < count; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    parts.push_back(rt::tpSliceOf(full, dim, groups, t, count));
    EXPECT_EQ(parts.back().dtype(), DType::F32);
    EXPECT_EQ(parts.back().shape(), partShape);
    EXPECT_EQ(valuesOf(parts.back()), want[static_cast<size_t>(t)]);
  }
  EXPECT_TRUE(rt::tpUnslice(parts, dim, groups).bitwiseEqual(full));
}

// Parts worked out by hand from the layout (docs/distributed.md): dim k in
// `groups` groups, each rank its contiguous share of every group.
TEST(TpSlice, PartsByHand) {
  // [2, 6] = [[0..5], [6..11]], columns in 3 groups of 2, 2 ranks: rank 0
  // takes columns 0, 2, 4 and rank 1 columns 1, 3, 5.
  expectParts({2, 6}, 1, 3, {2, 3}, {{0, 2, 4, 6, 8, 10},
                                     {1, 3, 5, 7, 9, 11}});
  // A fused q/k/v row [1, 12] (q = 0..3, k = 4..7, v = 8..11) over 2
  // ranks: each takes its half of q, of k and of v.
  expectParts({1, 12}, 1, 3, {1, 6}, {{0, 1, 4, 5, 8, 9},
                                      {2, 3, 6, 7, 10, 11}});
  // One group: contiguous columns. [2, 8] over 4 ranks, 2 columns each.
  expectParts({2, 8}, 1, 1, {2, 2}, {{0, 1, 8, 9},
                                     {2, 3, 10, 11},
                                     {4, 5, 12, 13},
                                     {6, 7, 14, 15}});
  // Dim 0, one group: rows 0-2 and rows 3-5 of [6, 2].
  expectParts({6, 2}, 0, 1, {3, 2}, {{0, 1, 2, 3, 4, 5},
                                     {6, 7, 8, 9, 10, 11}});
  // Dim 0, 3 groups of 2 rows: rank 0 rows 0, 2, 4, rank 1 rows 1, 3, 5.
  expectParts({6, 2}, 0, 3, {3, 2}, {{0, 1, 4, 5, 8, 9},
                                     {2, 3, 6, 7, 10, 11}});
  // A middle dim: [2, 4, 2] along dim 1 over 2 ranks; for each of the 2
  // outer rows a rank takes 2 of the 4 (each 2 elements wide).
  expectParts({2, 4, 2}, 1, 1, {2, 2, 2}, {{0, 1, 2, 3, 8, 9, 10, 11},
                                           {4, 5, 6, 7, 12, 13, 14, 15}});
}

// Every dtype (1, 2, 4 and 8 bytes), dims 0 and 1, groups 1 and 3, 2 and 4
// ranks: the parts have the full shape with dim k divided by the ranks, and
// joined in rank order they are the full tensor, bit for bit.
TEST(TpSlice, RoundTrip) {
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::I1})
    for (const Shape &shape : {Shape{12, 24}, Shape{24, 12, 3}})
      for (int64_t dim : {0, 1})
        for (int64_t groups : {1, 3})
          for (int64_t count : {2, 4}) {
            SCOPED_TRACE(std::string(rt::dtypeName(dtype)) + " " +
                         rt::shapeToString(shape) + " dim " +
                         std::to_string(dim) + ", " + std::to_string(groups) +
                         " groups, " + std::to_string(count) + " ranks");
            // Distinct elements where the dtype holds them (i1 alternates).
            std::vector<double> v = iota(rt::numElements(shape));
            for (double &x : v)
              x = dtype == DType::I1 ? std::fmod(x, 2) : std::fmod(x, 251);
            HostTensor full = tensorOf(dtype, shape, v);
            std::vector<HostTensor> parts;
            for (int64_t t = 0; t < count; ++t)
              parts.push_back(rt::tpSliceOf(full, dim, groups, t, count));
            Shape partShape = shape;
            partShape[static_cast<size_t>(dim)] /= count;
            for (const HostTensor &p : parts) {
              EXPECT_EQ(p.dtype(), dtype);
              EXPECT_EQ(p.shape(), partShape);
            }
            EXPECT_TRUE(rt::tpUnslice(parts, dim, groups).bitwiseEqual(full));
            // The parts in another order are another tensor.
            std::swap(parts[0], parts[1]);
            if (dtype != DType::I1) {
              EXPECT_FALSE(
                  rt::tpUnslice(parts, dim, groups).bitwiseEqual(full));
            }
          }
}

// Dims out of range, sizes that do not split, ranks and groups out of
// range, and blocks that differ are Errors saying what was expected.
TEST(TpSlice, Errors) {
  HostTensor full(DType::F32, {2, 6});
  auto slice = [&](int64_t dim, int64_t groups, int64_t index,
                   int64_t count) {
    return errorOf([&] { rt::tpSliceOf(full, dim, groups, index, count); });
  };
  auto has = [](const std::string &e, const std::string &part) {
    EXPECT_NE(e.find(part), std::string::npos)
        << "\"" << e << "\" lacks \"" << part << "\"";
  };
  std::string e = slice(2, 1, 0, 2);
  has(e, "tpSliceOf: dim 2 is out of range for a tensor of rank 2");
  has(e, "[2, 6]");
  has(e, "expected 0..1");
  has(slice(-1, 1, 0, 2), "dim -1 is out of range");
  e = slice(1, 4, 0, 2);
  has(e, "dim 1 of [2, 6] has size 6");
  has(e, "4 group(s) x 2 rank(s)");
  has(slice(0, 1, 0, 4), "dim 0 of [2, 6] has size 2");
  has(slice(1, 0, 0, 2), "groups is 0, expected at least 1");
  has(slice(1, 1, 0, 0), "0 ranks, expected at least 1");
  has(slice(1, 3, 2, 2), "rank 2 is not one of the 2 tensor-parallel ranks");
  has(slice(1, 3, -1, 2), "rank -1 is not one of the 2");
  has(errorOf([] { rt::tpSliceOf(HostTensor(DType::F32, {}), 0, 1, 0, 1); }),
      "dim 0 is out of range for a tensor of rank 0");

  HostTensor a(DType::F32, {2, 3}), b(DType::F32, {2, 4}), c(DType::I32, {2, 3});
  auto unslice = [](const std::vector<HostTensor> &blocks, int64_t dim,
                    int64_t groups) {
    return errorOf([&] { rt::tpUnslice(blocks, dim, groups); });
  };
  has(unslice({}, 0, 1), "tpUnslice: no blocks");
  e = unslice({a, b}, 1, 1);
  has(e, "block 1 is f32 [2, 4], expected f32 [2, 3] as block 0");
  has(unslice({a, c}, 1, 1), "block 1 is i32 [2, 3], expected f32 [2, 3]");
  has(unslice({a, a}, 2, 1), "dim 2 is out of range for blocks of rank 2");
  has(unslice({a, a}, 1, 2),
      "dim 1 of the blocks ([2, 3]) has size 3, not a multiple of its 2 groups");
  has(unslice({a, a}, 1, 0), "groups is 0, expected at least 1");
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
    EXPECT_TRUE(want.bitwiseEqual(m)) << "mean";
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
    EXPECT_TRUE(rt::shardOf(shared, r, 2).bitwiseEqual(local[i])) << "local";
    EXPECT_EQ(valuesOf(local[i]),
              r == 0 ? (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8})
                     : (std::vector<double>{9, 10, 11, 12, 13, 14, 15, 0}));
    EXPECT_NE(notDivisible[i].find("not divisible"), std::string::npos)
        << notDivisible[i];
  }
}


} // namespace
