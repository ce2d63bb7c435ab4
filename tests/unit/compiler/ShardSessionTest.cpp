//===- ShardSessionTest.cpp - step-shard: errors, Sessions on ranks -------===//
//
//  - errors: option parsing, LAMB under ZeRO, a Session whose world size is
//    not the artifact's;
//  - Sessions on a thread group (set() of full params, step() on the rank's
//    rows, gathered()) against one unsharded Session, and their checkpoints
//    (save_params, save_shards) loaded into 1 and 4 ranks.
//
//===----------------------------------------------------------------------===//

#include "ShardTestUtil.h"

#include "runtime/Session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include <unistd.h>

namespace {
using namespace step;
using namespace step::test;

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
  EXPECT_TRUE(o.prefetch);
  o = ShardOptions::parse("zero2,bucket=0", 2);
  EXPECT_EQ(o.bucketBytes, 0);
  o = ShardOptions::parse("zero3,prefetch=0", 2);
  EXPECT_FALSE(o.prefetch);
  EXPECT_THROW(ShardOptions::parse("zero2,prefetch=1", 2),
               std::invalid_argument);
  EXPECT_THROW(ShardOptions::parse("zero3,prefetch=yes", 2),
               std::invalid_argument);
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
// save_shards writes and the training checkpoint Session::save writes (full
// tensors, collective) all load, bit for bit, into one unsharded Session and
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
      s.save((dir / "ckpt").string()); // a training checkpoint
    });
    ASSERT_TRUE(fs::exists(dir / "shards" / "shards.json"));
    ASSERT_TRUE(fs::is_directory(dir / "shards" / "rank1"));
    // Session::load also takes the step count.
    auto load = [&](Session &s, const std::string &which) {
      if (which != "ckpt")
        return s.load_params((dir / which).string());
      EXPECT_EQ(s.load((dir / which).string()).step, 1);
      EXPECT_EQ(s.stepsDone(), 1);
    };
    for (const char *which : {"full", "shards", "ckpt"}) {
      SCOPED_TRACE(which);
      Session single(*one, SessionOptions{Backend::Cpu, nullptr});
      load(single, which);
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
        load(s, which);
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
