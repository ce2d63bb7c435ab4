//===- TpSessionTest.cpp - Sessions of a tensor-parallel step on threads --===//
//
// A hand-built step whose meta "shard" has "tp" and "tp_split" (the layout
// stepc --shard=tp:T writes, docs/distributed.md), run as Sessions on a
// thread group: load_params and set of full tensors keep each rank's part,
// gathered() joins the parts, save_params, save_shards and save write full
// tensors, and what they write loads back into tensor-parallel ranks and
// into one process. The parts are written out by hand from the layout.
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"

#include "PlanTestUtil.h"
#include "TestUtil.h"
#include "runtime/Npy.h"
#include "tests/unit/runtime/CommTestUtil.h"

#include <filesystem>
#include <fstream>

namespace step::rt::test {
namespace {
namespace fs = std::filesystem;
using step::test::onRanks;
constexpr auto F32 = DType::F32;

/// One rank's step of a "model" split `tp` ways over `world` ranks:
///   w (param, full [2, 6], split along dim 1 in 3 groups, as a fused
///   q/k/v weight), v (param, full [4], split along dim 0), b (param [3],
///   replicated), w.m (state, split as w), x (input, shaped as w's part);
///   loss = sum(x * w), w <- w + x, w.m <- w.m + w.
/// tp = 1 and world = 1: the unsharded step on full tensors, no meta.
Artifact tpStep(int64_t tp, int64_t world) {
  PlanBuilder p;
  Shape part = {2, 6 / tp};
  int64_t w = p.argument("w", BufferKind::Param, F32, part);
  p.argument("v", BufferKind::Param, F32, {4 / tp});
  p.argument("b", BufferKind::Param, F32, {3});
  int64_t m = p.argument("w.m", BufferKind::State, F32, part);
  int64_t x = p.argument("x", BufferKind::Input, F32, part);
  int64_t xw = p.transient(F32, part, 0);
  int64_t loss = p.transient(F32, {}, 48);
  int64_t w1 = p.transient(F32, part, 64);
  int64_t m1 = p.transient(F32, part, 112);
  p.step("step.mul", {}, {x, w}, {xw});
  p.step("step.reduce_sum", {{"dims", {0, 1}}}, {xw}, {loss});
  p.step("step.add", {}, {w, x}, {w1});
  p.step("step.add", {}, {m, w}, {m1});
  p.result(loss, "loss");
  p.result(w1, "w");
  p.result(m1, "w.m");
  if (world > 1) {
    nlohmann::json qkv = {{"dim", 1}, {"groups", 3}, {"shape", {2, 6}}};
    p.artifact.meta["shard"] = {
        {"world_size", world},
        {"sharded", nlohmann::json::object()},
        {"tp", tp},
        {"tp_split",
         {{"w", qkv},
          {"w.m", qkv},
          {"v", {{"dim", 0}, {"groups", 1}, {"shape", {4}}}}}}};
  }
  return p.artifact;
}

std::vector<double> iota(int n, double from = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i)
    v.push_back(from + i);
  return v;
}

/// Full params: w = 0..11 as [2, 6], v = 10, 20, 30, 40, b = 1, 2, 3.
void writeFullParams(const std::string &dir) {
  fs::create_directories(dir);
  writeNpy(dir + "/w.npy", make(F32, {2, 6}, iota(12)));
  writeNpy(dir + "/v.npy", make(F32, {4}, {10, 20, 30, 40}));
  writeNpy(dir + "/b.npy", make(F32, {3}, {1, 2, 3}));
}

// The columns of w in 3 groups of 2, over 2 ranks: rank 0 takes columns
// 0, 2, 4 of each row, rank 1 columns 1, 3, 5. v's rows: 2 each.
const std::vector<double> kWPart[2] = {{0, 2, 4, 6, 8, 10},
                                       {1, 3, 5, 7, 9, 11}};
const std::vector<double> kVPart[2] = {{10, 20}, {30, 40}};

SessionOptions on(Communicator &comm) {
  SessionOptions o;
  o.backend = Backend::Cpu;
  o.communicator = &comm;
  return o;
}

/// tpStep(2, world) on `world` thread ranks, each a Session that loaded
/// the full params of writeFullParams(dir / "in"): checks rank r's layout
/// (r = d * 2 + t), its parts of w and v (part t) and the gathered full
/// tensors, then runs body(r, session).
void onLoadedTpRanks(const TempDir &dir, int world,
                     const std::function<void(int, Session &)> &body) {
  writeFullParams(dir / "in");
  Artifact a = tpStep(2, world);
  auto ranks = makeThreadGroup(world);
  onRanks(ranks, [&](int r) {
    Session s(a, on(*ranks[static_cast<size_t>(r)]));
    EXPECT_EQ(s.tensorParallel(), 2);
    EXPECT_EQ(s.tensorParallelRank(), r % 2);
    EXPECT_EQ(s.dataRank(), r / 2);
    EXPECT_EQ(s.dataWorldSize(), world / 2);
    s.load_params(dir / "in");
    expectExact(s.get("w"), F32, {2, 3}, kWPart[r % 2]);
    expectExact(s.get("v"), F32, {2}, kVPart[r % 2]);
    expectExact(s.gathered("w"), F32, {2, 6}, iota(12));
    expectExact(s.gathered("v"), F32, {4}, {10, 20, 30, 40});
    body(r, s);
  });
}

// 2 ranks, tp 2: full params load as parts, gathered() joins them, a step
// runs on the parts, and save_params / save_shards / save write full
// tensors (save_shards beside its rank folders, not in them) that load
// back into 2 ranks.
TEST(TpSession, PartsLoadGatherAndSave) {
  TempDir dir;
  onLoadedTpRanks(dir, 2, [&](int r, Session &s) {
    expectExact(s.get("b"), F32, {3}, {1, 2, 3});
    expectExact(s.get("w.m"), F32, {2, 3}, std::vector<double>(6, 0));
    expectExact(s.gathered("b"), F32, {3}, {1, 2, 3});

    // loss = the sum of this rank's part of w (x is ones).
    HostTensor ones = make(F32, {2, 3}, std::vector<double>(6, 1));
    EXPECT_DOUBLE_EQ(s.step({{"x", ones}}), r == 0 ? 30.0 : 36.0);
    expectExact(s.gathered("w"), F32, {2, 6}, iota(12, 1));
    expectExact(s.gathered("w.m"), F32, {2, 6}, iota(12));

    s.save_params(dir / "out");
    s.save_shards(dir / "shards");
    s.save(dir / "ckpt");
  });
  // Full tensors, written once by rank 0.
  expectExact(readNpy(dir / "out/w.npy"), F32, {2, 6}, iota(12, 1));
  expectExact(readNpy(dir / "out/w.m.npy"), F32, {2, 6}, iota(12));
  expectExact(readNpy(dir / "out/v.npy"), F32, {4}, {10, 20, 30, 40});
  expectExact(readNpy(dir / "shards/w.npy"), F32, {2, 6}, iota(12, 1));
  expectExact(readNpy(dir / "shards/w.m.npy"), F32, {2, 6}, iota(12));
  for (const char *rank : {"rank0", "rank1"})
    for (const char *name : {"w", "w.m", "v"})
      EXPECT_FALSE(fs::exists(dir / (std::string("shards/") + rank + "/" +
                                     name + ".npy")))
          << rank << "/" << name;
  nlohmann::json manifest;
  std::ifstream(dir / "shards/shards.json") >> manifest;
  EXPECT_EQ(manifest["sharded"], nlohmann::json::object());
  EXPECT_EQ(manifest["world_size"], 2);

  // Each folder loads back into 2 ranks as the parts of the trained w.
  Artifact a = tpStep(2, 2);
  auto ranks = makeThreadGroup(2);
  onRanks(ranks, [&](int r) {
    for (const char *from : {"out", "shards"}) {
      SCOPED_TRACE(from);
      Session s(a, on(*ranks[static_cast<size_t>(r)]));
      s.load_params(dir / from);
      std::vector<double> w = kWPart[r];
      for (double &x : w)
        x += 1;
      expectExact(s.get("w"), F32, {2, 3}, w);
      expectExact(s.get("w.m"), F32, {2, 3}, kWPart[r]);
    }
    Session s(a, on(*ranks[static_cast<size_t>(r)]));
    EXPECT_EQ(s.load(dir / "ckpt").step, 1);
    expectExact(s.get("w.m"), F32, {2, 3}, kWPart[r]);
    expectExact(s.get("v"), F32, {2}, kVPart[r]);
  });
}

// One process, unsharded, loads what the 2 tensor-parallel ranks wrote:
// the full tensors.
TEST(TpSession, FullTensorsLoadIntoOneProcess) {
  TempDir dir;
  writeFullParams(dir / "in");
  Artifact a = tpStep(2, 2);
  auto ranks = makeThreadGroup(2);
  onRanks(ranks, [&](int r) {
    Session s(a, on(*ranks[static_cast<size_t>(r)]));
    s.load_params(dir / "in");
    s.step({{"x", make(F32, {2, 3}, std::vector<double>(6, 1))}});
    s.save_params(dir / "out");
  });
  Session one(tpStep(1, 1));
  EXPECT_EQ(one.tensorParallel(), 1);
  EXPECT_EQ(one.dataWorldSize(), 1);
  one.load_params(dir / "out");
  expectExact(one.get("w"), F32, {2, 6}, iota(12, 1));
  expectExact(one.get("w.m"), F32, {2, 6}, iota(12));
  expectExact(one.get("v"), F32, {4}, {10, 20, 30, 40});
}

// 4 ranks, tp 2: two data-parallel replicas of a tensor-parallel pair.
// Ranks 2 and 3 hold the parts ranks 0 and 1 hold; gathered() takes the
// parts of ranks 0 and 1.
TEST(TpSession, DataParallelReplicasOfTensorParallelGroups) {
  TempDir dir;
  onLoadedTpRanks(dir, 4, [](int, Session &) {});
}

// set() takes the full tensor (keeping the rank's part) or the part; any
// other shape or dtype is refused naming both.
TEST(TpSession, SetTakesTheFullTensorOrThePart) {
  auto ranks = makeThreadGroup(2);
  Artifact a = tpStep(2, 2);
  onRanks(ranks, [&](int r) {
    Session s(a, on(*ranks[static_cast<size_t>(r)]));
    s.set("w", make(F32, {2, 6}, iota(12, 100)));
    std::vector<double> want = kWPart[r];
    for (double &x : want)
      x += 100;
    expectExact(s.get("w"), F32, {2, 3}, want);
    s.set("w", make(F32, {2, 3}, {1, 2, 3, 4, 5, 6}));
    expectExact(s.get("w"), F32, {2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_ERROR(s.set("w", HostTensor(F32, {2, 5})),
                 {"set: param 'w' expects f32 [2, 6] (the full tensor",
                  "or that part, f32 [2, 3]; found f32 [2, 5]"});
    EXPECT_ERROR(s.set("w", HostTensor(DType::I64, {2, 6})),
                 {"param 'w' expects f32 [2, 6]", "found i64 [2, 6]"});
    expectExact(s.get("w"), F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  });
}

// A tp_split that names no param or state, or whose part is not the
// step's buffer, is refused when the Session starts; so is meta the
// reader would refuse, in an artifact made in memory.
TEST(TpSession, SplitsMustMatchTheStep) {
  auto ranks = makeThreadGroup(2);
  Communicator &rank0 = *ranks[0]; // Session's constructor is no collective
  auto withSplit = [](const std::string &name, nlohmann::json entry) {
    Artifact a = tpStep(2, 2);
    a.meta["shard"]["tp_split"][name] = std::move(entry);
    return a;
  };
  nlohmann::json qkv = {{"dim", 1}, {"groups", 3}, {"shape", {2, 6}}};
  EXPECT_ERROR(Session(withSplit("x", qkv), on(rank0)),
               {"meta \"shard\" \"tp_split\" names 'x', which is not a param "
                "or state of the step",
                "params: w, v, b; state: w.m"});
  EXPECT_ERROR(Session(withSplit("nope", qkv), on(rank0)),
               {"names 'nope', which is not a param or state"});
  EXPECT_ERROR(
      Session(withSplit("w", {{"dim", 1}, {"groups", 1}, {"shape", {2, 8}}}),
              on(rank0)),
      {"'w': its full shape [2, 8] split 2 ways along dim 1 is [2, 4], but "
       "the step's param is f32 [2, 3]"});
  EXPECT_ERROR(
      Session(withSplit("w", {{"dim", 1}, {"groups", 4}, {"shape", {2, 6}}}),
              on(rank0)),
      {"plan 'train_step': meta \"shard\": \"tp_split\" 'w': dim 1 of [2, 6] "
       "has size 6, expected a multiple of groups 4 x tp 2"});
  Artifact badTp = tpStep(2, 2);
  badTp.meta["shard"]["tp"] = "2";
  EXPECT_ERROR(Session(badTp, on(rank0)), {"\"tp\" is \"2\""});
}

} // namespace
} // namespace step::rt::test
