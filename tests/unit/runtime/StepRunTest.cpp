//===- StepRunTest.cpp - step-run end to end, good and bad input ----------===//
//
// Runs the step-run binary (STEP_RUN_PATH) on an artifact written with
// writeArtifact (sgdStep() of PlanTestUtil.h) and checks its output, the
// files it writes, and that every kind of bad input gives a clear message,
// exit code 1, and leaves the params folder byte for byte as it was.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"
#include "TestUtil.h"
#include "tests/unit/runtime/CommTestUtil.h"
#include "runtime/Npy.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

namespace step::rt::test {
namespace {
namespace fs = std::filesystem;
using step::test::freePort;

struct RunResult {
  int code = -1;
  std::string output; // stdout and stderr
};

/// Runs `script` with /bin/sh, its stdout and stderr together.
RunResult runShell(const std::string &script) {
  std::string cmd = "{ " + script + "; } 2>&1";
  RunResult r;
  FILE *pipe = ::popen(cmd.c_str(), "r");
  if (!pipe)
    return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    r.output.append(buf, n);
  int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

RunResult stepRun(const std::string &args) {
  return runShell(std::string(STEP_RUN_PATH) + " " + args);
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A model, a params folder (w only: state starts at zero) and one batch.
struct Fixture {
  TempDir dir;
  std::string model = dir / "sgd.step", params = dir / "params",
              inputs = dir / "inputs", out = dir / "out";
  Fixture() {
    writeArtifact(model, sgdStep());
    fs::create_directories(params);
    fs::create_directories(inputs);
    writeNpy(params + "/w.npy", make(DType::F32, {3}, {1, 1, 1}));
    writeNpy(inputs + "/x.npy", make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  }
  std::string paramBytes() const { return slurp(params + "/w.npy"); }
  /// Runs with `args` appended; expects failure naming every `parts`, the
  /// params untouched and no --out written.
  void expectFailure(const std::string &args,
                     std::initializer_list<const char *> parts) {
    std::string before = paramBytes();
    RunResult r = stepRun(args + " --out " + out);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("step-run: error: "), std::string::npos)
        << r.output;
    for (const char *part : parts)
      EXPECT_NE(r.output.find(part), std::string::npos)
          << "output \"" << r.output << "\" lacks \"" << part << "\"";
    EXPECT_EQ(paramBytes(), before);
    EXPECT_FALSE(fs::exists(out));
  }
};

TEST(StepRun, TrainsAndWritesParamsAndTrace) {
  Fixture f;
  std::string params = f.paramBytes();
  RunResult r = stepRun(f.model + " --params " + f.params + " --inputs " + f.inputs +
                  " --steps 2 --backend=cpu --out " + f.out + " --trace=" +
                  f.dir / "trace.json");
  ASSERT_EQ(r.code, 0) << r.output;
  // Step 2's loss is 5.5 up to f32 rounding of w; printed with %.9g.
  double loss2 = 0;
  EXPECT_EQ(std::sscanf(r.output.c_str(), "step 1 loss = 21\nstep 2 loss = %lf",
                        &loss2),
            1)
      << r.output;
  EXPECT_NEAR(loss2, 5.5, 1e-5);
  EXPECT_EQ(f.paramBytes(), params);
  expectValues(readNpy(f.out + "/w.npy"), DType::F32, {3}, {-0.45, -1.03, -1.61});
  expectValues(readNpy(f.out + "/w.momentum.npy"), DType::F32, {3},
               {9.5, 13.3, 17.1});
  expectExact(readNpy(f.out + "/step.npy"), DType::I64, {}, {2});
  auto trace = nlohmann::json::parse(slurp(f.dir / "trace.json"));
  EXPECT_EQ(trace["backend"], "cpu");
  ASSERT_EQ(trace["steps"].size(), 2u);
  EXPECT_EQ(trace["steps"][1]["step"], 2);
  EXPECT_EQ(trace["steps"][0]["loss"], 21.0);
  EXPECT_GE(trace["steps"][0]["wall_s"].get<double>(), 0.0);
}

TEST(StepRun, NumberedBatchFoldersCycle) {
  Fixture f;
  fs::remove(f.inputs + "/x.npy");
  fs::create_directories(f.inputs + "/0000");
  fs::create_directories(f.inputs + "/0001");
  writeNpy(f.inputs + "/0000/x.npy", make(DType::F32, {2, 3}, {1, 1, 1, 1, 1, 1}));
  writeNpy(f.inputs + "/0001/x.npy", make(DType::F32, {2, 3}, {0, 0, 0, 0, 0, 0}));
  // With lr 0.1 and w = 1: step 1 sees ones (loss 6, g = 2, w = 0.8);
  // step 2 zeros (loss 0, buf = 1.8, w = 0.62); step 3 ones again.
  RunResult r = stepRun(f.model + " --params " + f.params + " --inputs " + f.inputs +
                  " --steps 3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 1 loss = 6\nstep 2 loss = 0\nstep 3 loss = 3.7"),
            std::string::npos)
      << r.output;
}

TEST(StepRun, CheckpointsAndResumes) {
  Fixture f;
  fs::remove(f.inputs + "/x.npy");
  for (int k = 0; k < 3; ++k) {
    fs::create_directories(f.inputs + "/000" + std::to_string(k));
    writeNpy(f.inputs + "/000" + std::to_string(k) + "/x.npy",
             make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, float(k)}));
  }
  std::string io = f.model + " --params " + f.params + " --inputs " + f.inputs;
  std::string ckpt = f.dir / "ckpt";
  RunResult all = stepRun(io + " --steps 5 --out " + f.dir / "all");
  ASSERT_EQ(all.code, 0) << all.output;
  // Steps 1-4 with a checkpoint every 2 (step 4 is also the last).
  RunResult part = stepRun(io + " --steps 4 --checkpoint " + ckpt +
                           " --checkpoint-every 2");
  ASSERT_EQ(part.code, 0) << part.output;
  auto manifest = nlohmann::json::parse(slurp(ckpt + "/manifest.json"));
  EXPECT_EQ(manifest["step"], 4);
  EXPECT_EQ(manifest["data"]["batch_folders"], 3);
  EXPECT_EQ(manifest["data"]["next_batch"], 1); // step 5 reads 0001/
  // Resumed: step 5 only, on 0001/, ending where the straight run ended.
  RunResult rest = stepRun(io + " --steps 5 --checkpoint " + ckpt +
                           " --resume --out " + f.out);
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from " + ckpt + " after step 4"),
            std::string::npos)
      << rest.output;
  EXPECT_EQ(rest.output.find("step 4 loss"), std::string::npos) << rest.output;
  size_t at = all.output.find("step 5 loss");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(rest.output.find(all.output.substr(at)), std::string::npos)
      << rest.output;
  for (const char *name : {"w", "w.momentum", "step"})
    EXPECT_EQ(slurp(f.out + "/" + name + ".npy"),
              slurp(f.dir / "all/" + name + ".npy"))
        << name;
  EXPECT_EQ(nlohmann::json::parse(slurp(ckpt + "/manifest.json"))["step"], 5);
  // Already at --steps: nothing runs, --out gets the checkpoint's tensors.
  RunResult done = stepRun(io + " --steps 5 --checkpoint " + ckpt +
                           " --resume --out " + f.dir / "again");
  ASSERT_EQ(done.code, 0) << done.output;
  EXPECT_NE(done.output.find("is at step 5, --steps reached"),
            std::string::npos)
      << done.output;
  EXPECT_EQ(slurp(f.dir / "again/w.npy"), slurp(f.out + "/w.npy"));

  // Other batches than the checkpoint's: refused, nothing written.
  fs::remove_all(f.out);
  fs::remove_all(f.inputs + "/0002");
  f.expectFailure(io + " --steps 6 --checkpoint " + ckpt + " --resume",
                  {"--resume", "3 batch folder(s)", "has 2",
                   "batch position would not mean the same"});
  // A damaged checkpoint: refused, naming the file.
  std::string w = slurp(ckpt + "/w.npy");
  w.back() ^= 1;
  std::ofstream(ckpt + "/w.npy", std::ios::binary) << w;
  f.expectFailure(io + " --steps 6 --checkpoint " + ckpt + " --resume",
                  {"w.npy", "checksum"});
  // The flags need their folder.
  RunResult usage = stepRun(io + " --resume");
  EXPECT_NE(usage.code, 0);
  EXPECT_NE(usage.output.find("--resume requires --checkpoint"),
            std::string::npos)
      << usage.output;
}

TEST(StepRun, BadInputFailsCleanly) {
  Fixture f;
  std::string io = " --params " + f.params + " --inputs " + f.inputs;
  f.expectFailure(f.dir / "missing.step" + io, {"missing.step", "cannot open"});

  std::ofstream(f.dir / "junk.step") << "not an artifact at all, not at all";
  f.expectFailure(f.dir / "junk.step" + io, {"junk.step", "wrong magic"});

  std::string bytes = slurp(f.model);
  bytes[bytes.size() / 2] ^= 0x20;
  std::ofstream(f.dir / "corrupt.step", std::ios::binary) << bytes;
  f.expectFailure(f.dir / "corrupt.step" + io, {"corrupt.step", "checksum"});

  bytes = slurp(f.model);
  std::ofstream(f.dir / "short.step", std::ios::binary)
      << bytes.substr(0, bytes.size() - 9);
  f.expectFailure(f.dir / "short.step" + io, {"short.step", "truncated"});

  f.expectFailure(f.model + io + " --backend=cuda",
                  {"the CUDA backend is not available", "use --backend=cpu"});
  f.expectFailure(f.model + " --params " + f.dir / "nope" + " --inputs " +
                      f.inputs,
                  {"nope", "is not a folder"});
  f.expectFailure(f.model + " --params " + f.inputs + " --inputs " + f.inputs,
                  {"missing param 'w'", "w.npy"});

  writeNpy(f.params + "/w.momentum.npy", make(DType::F32, {2}, {0, 0}));
  f.expectFailure(f.model + io,
                  {"w.momentum.npy", "expects f32 [3], found f32 [2]"});
  fs::remove(f.params + "/w.momentum.npy");

  writeNpy(f.inputs + "/x.npy", make(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6}));
  f.expectFailure(f.model + io,
                  {"step 1", "input 'x' expects f32 [2, 3], found f32 [3, 2]"});
  fs::remove(f.inputs + "/x.npy");
  f.expectFailure(f.model + io, {"holds neither .npy files nor numbered"});
  fs::create_directories(f.inputs + "/0000");
  writeNpy(f.inputs + "/0000/y.npy", make(DType::F32, {1}, {0}));
  f.expectFailure(f.model + io, {"missing input 'x'", "0000"});

  RunResult usage = stepRun(f.model);
  EXPECT_NE(usage.code, 0);
  EXPECT_NE(usage.output.find("--params is required"), std::string::npos)
      << usage.output;
}

/// `args` on 4 step-run processes joined over TCP (STEP_RANK ...), as
/// docs/distributed.md starts them without MPI; exit code 1 when any rank
/// fails.
RunResult stepRunOn4Ranks(const std::string &args) {
  std::string env = "STEP_WORLD_SIZE=4 STEP_MASTER_ADDR=127.0.0.1 "
                    "STEP_MASTER_PORT=" + std::to_string(freePort()) +
                    " STEP_CONNECT_TIMEOUT=60";
  return runShell("pids=; for r in 0 1 2 3; do STEP_RANK=$r " + env + " " +
                  STEP_RUN_PATH + " " + args +
                  " & pids=\"$pids $!\"; done; rc=0; for p in $pids; do "
                  "wait $p || rc=1; done; exit $rc");
}

/// Each of 4 ranks multiplies its row x [1, 3] by its part of w (rank t of
/// its tensor-parallel group holds columns 3t..3t+2 of [1, 6]) and sums
/// it; `reduce` then adds the collectives that make the loss of those
/// partial sums. Writes the artifact and params/w.npy (1..6) and
/// inputs/x.npy (rows [1, 0, 0] and [0, 0, 10]) under `dir`; returns the
/// artifact's path.
std::string writeTpToy(const TempDir &dir,
                       const std::function<int64_t(PlanBuilder &, int64_t)> &reduce) {
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, DType::F32, {1, 3});
  int64_t x = p.argument("x", BufferKind::Input, DType::F32, {1, 3});
  int64_t xw = p.transient(DType::F32, {1, 3}, 0);
  int64_t part = p.transient(DType::F32, {}, 16);
  p.step("step.mul", {}, {x, w}, {xw});
  p.step("step.reduce_sum", {{"dims", {0, 1}}}, {xw}, {part});
  p.result(reduce(p, part), "loss");
  p.artifact.meta["shard"] = {
      {"world_size", 4},
      {"sharded", nlohmann::json::object()},
      {"tp", 2},
      {"tp_split", {{"w", {{"dim", 1}, {"groups", 1}, {"shape", {1, 6}}}}}}};
  std::string model = dir / "tp.step";
  writeArtifact(model, p.artifact);
  fs::create_directories(dir / "params");
  fs::create_directories(dir / "inputs");
  writeNpy(dir / "params/w.npy", make(DType::F32, {1, 6}, {1, 2, 3, 4, 5, 6}));
  writeNpy(dir / "inputs/x.npy", make(DType::F32, {2, 3}, {1, 0, 0, 0, 0, 10}));
  return model;
}

/// `input` reduced by `reduce` over replica groups of `size` ([0, 1, 2, 3]
/// in the order `ranks`), into a new scalar at `offset`.
int64_t allReduce(PlanBuilder &p, int64_t input, const std::string &reduce,
                  int64_t size, std::vector<int64_t> ranks, int64_t offset) {
  int64_t out = p.transient(DType::F32, {}, offset);
  p.step("step.all_reduce",
         {{"reduce", reduce}, {"group_size", size}, {"replica_groups", ranks}},
         {input}, {out});
  return out;
}

// Tensor parallelism 2 over 4 ranks: ranks 0, 1 are data-parallel replica
// 0 and take row 0 of the global batch, ranks 2, 3 replica 1 and row 1.
// Each rank's partial sum is summed over the 4 ranks by an all_reduce:
//   (row 0 + row 1) . (part 0 + part 1) = [1, 0, 10] . [5, 7, 9] = 95.
// (Rows taken by tensor-parallel index instead would give
// 2 (row 0 . part 0 + row 1 . part 1) = 2 (1 + 60) = 122.)
TEST(StepRun, TensorParallelRanksShareRows) {
  TempDir dir;
  std::string model = writeTpToy(dir, [](PlanBuilder &p, int64_t part) {
    return allReduce(p, part, "sum", 4, {0, 1, 2, 3}, 32);
  });
  fs::create_directories(dir / "odd");
  writeNpy(dir / "odd/x.npy", make(DType::F32, {3, 3}, std::vector<double>(9)));

  RunResult r = stepRunOn4Ranks(model + " --params " + dir / "params" +
                                " --inputs " + dir / "inputs" +
                                " --backend=cpu --out " + dir / "out");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "step 1 loss = 95\n");
  // --out: w whole again, gathered from the parts of ranks 0 and 1.
  expectExact(readNpy(dir / "out/w.npy"), DType::F32, {1, 6},
              {1, 2, 3, 4, 5, 6});

  // 3 rows do not split into the 2 data-parallel replicas.
  r = stepRunOn4Ranks(model + " --params " + dir / "params" + " --inputs " +
                      dir / "odd" + " --backend=cpu");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("input 'x' of shape [3, 3] does not split into 2 "
                          "ranks along dim 0 (the data-parallel replicas: 4 "
                          "ranks in groups of 2 tensor-parallel ranks)"),
            std::string::npos)
      << r.output;
}

// A 2 x 2 mesh over TCP, with the collectives of replica groups: the
// same rows and parts as above, summed in the tensor-parallel groups
// ({0, 1}, {2, 3}: row d . [5, 7, 9], 5 and 90), then averaged over the
// data-parallel ones ({0, 2}, {1, 3}): 47.5 on every rank. (Groups taken as
// the whole world would give 4 x 95 = 380 and then 380.)
TEST(StepRun, TensorParallelMeshOverTcpSubgroups) {
  TempDir dir;
  std::string model = writeTpToy(dir, [](PlanBuilder &p, int64_t part) {
    int64_t group = allReduce(p, part, "sum", 2, {0, 1, 2, 3}, 32);
    return allReduce(p, group, "mean", 2, {0, 2, 1, 3}, 48);
  });
  for (const char *overlap : {"", " --no-overlap"}) {
    RunResult r = stepRunOn4Ranks(model + " --params " + dir / "params" +
                                  " --inputs " + dir / "inputs" +
                                  " --backend=cpu --steps 2" + overlap);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(r.output, "step 1 loss = 47.5\nstep 2 loss = 47.5\n")
        << overlap;
  }
}

} // namespace
} // namespace step::rt::test
