//===- CheckpointTest.cpp - Atomic, verified training checkpoints ---------===//
//
// writeCheckpoint/readCheckpoint (runtime/Checkpoint.h): round trips of
// every dtype, atomic replacement, what an interrupted write leaves behind
// and how the next reader and writer treat it, and the refusal of damaged
// checkpoints, each naming the file. Then Session::save/load on the SGD
// step of PlanTestUtil.h: a resumed session continues bit-identically.
// (Killing real processes at random moments: tests/e2e/checkpoint_kill.py.)
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Session.h"

#include "PlanTestUtil.h"
#include "TestUtil.h"
#include "runtime/Npy.h"

#include <filesystem>
#include <fstream>

namespace step::rt::test {
namespace {
namespace fs = std::filesystem;

Checkpoint sample(int64_t step, float w0) {
  Checkpoint c;
  c.step = step;
  c.data = {{"next_batch", 3}, {"note", "x"}};
  c.tensors["w"] = make(F32, {2, 2}, {w0, 2, 3, 4});
  c.tensors["layer0/b"] = make(DType::BF16, {3}, {1, -2, 0.5});
  c.tensors["h"] = make(DType::F16, {2}, {0.25, -8});
  c.tensors["step"] = make(I64, {}, {static_cast<double>(step)});
  c.tensors["ids"] = make(DType::I32, {3}, {7, 8, 9});
  c.tensors["mask"] = make(DType::I1, {2}, {1, 0});
  return c;
}

void expectSame(const Checkpoint &a, const Checkpoint &b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.data, b.data);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto &[name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    EXPECT_TRUE(t.bitwiseEqual(b.tensors.at(name))) << name;
  }
}

std::vector<std::string> entries(const fs::path &dir) {
  std::vector<std::string> out;
  for (const fs::directory_entry &e : fs::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void writeText(const fs::path &p, const std::string &text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string readText(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Checkpoint, RoundTripsEveryDtypeAndSubfolders) {
  TempDir dir;
  Checkpoint c = sample(7, 1);
  EXPECT_FALSE(hasCheckpoint(dir / "ckpt"));
  writeCheckpoint(dir / "ckpt", c);
  EXPECT_TRUE(hasCheckpoint(dir / "ckpt"));
  expectSame(c, readCheckpoint(dir / "ckpt"));
  EXPECT_TRUE(fs::exists(dir / "ckpt/layer0/b.npy"));
  // Plain .npy files: load_params and numpy read them too.
  EXPECT_TRUE(readNpy(dir / "ckpt/w.npy").bitwiseEqual(c.tensors["w"]));
  // Nothing but the checkpoint is left beside it.
  EXPECT_EQ(entries(dir.path), std::vector<std::string>{"ckpt"});
  // A trailing separator names the same folder.
  expectSame(c, readCheckpoint(dir / "ckpt/"));
}

TEST(Checkpoint, ReplacesTheWholeFolder) {
  TempDir dir;
  Checkpoint a = sample(1, 1);
  a.tensors["only.in.a"] = make(F32, {1}, {5});
  writeCheckpoint(dir / "ckpt", a);
  Checkpoint b = sample(2, -1);
  writeCheckpoint(dir / "ckpt", b);
  expectSame(b, readCheckpoint(dir / "ckpt"));
  // The old folder went as a whole: no file of the first survives.
  EXPECT_FALSE(fs::exists(dir / "ckpt/only.in.a.npy"));
  EXPECT_EQ(entries(dir.path), std::vector<std::string>{"ckpt"});
}

TEST(Checkpoint, InterruptedWritesLeaveThePreviousOne) {
  TempDir dir;
  Checkpoint a = sample(4, 1);
  writeCheckpoint(dir / "ckpt", a);
  // A write cut off before its manifest: a partial sibling folder (a write
  // marks its folders first).
  fs::create_directories(dir / "ckpt.tmp.999999");
  writeText(dir / "ckpt.tmp.999999/.stepjit-checkpoint-write", "");
  writeText(dir / "ckpt.tmp.999999/w.npy", "partial");
  expectSame(a, readCheckpoint(dir / "ckpt"));
  // The next write clears it away.
  Checkpoint b = sample(5, 2);
  writeCheckpoint(dir / "ckpt", b);
  expectSame(b, readCheckpoint(dir / "ckpt"));
  EXPECT_EQ(entries(dir.path), std::vector<std::string>{"ckpt"});

  // Cut off between the fallback's two renames: the folder is gone and
  // the previous checkpoint waits aside; readers take it, and the next
  // write replaces it.
  fs::rename(dir / "ckpt", dir / "ckpt.old.42");
  EXPECT_TRUE(hasCheckpoint(dir / "ckpt"));
  expectSame(b, readCheckpoint(dir / "ckpt"));
  writeCheckpoint(dir / "ckpt", a);
  expectSame(a, readCheckpoint(dir / "ckpt"));
  EXPECT_EQ(entries(dir.path), std::vector<std::string>{"ckpt"});
  // A folder without a manifest is no checkpoint.
  fs::remove(dir / "ckpt/manifest.json");
  EXPECT_FALSE(hasCheckpoint(dir / "ckpt"));
  EXPECT_ERROR(readCheckpoint(dir / "ckpt"),
               {"no manifest.json", "not a complete checkpoint"});
}

TEST(Checkpoint, RefusesToReplaceOtherFolders) {
  TempDir dir;
  fs::create_directories(dir / "mine");
  writeText(dir / "mine/notes.txt", "keep me");
  EXPECT_ERROR(writeCheckpoint(dir / "mine", sample(1, 1)),
               {"mine", "holds no checkpoint", "refusing to replace it"});
  EXPECT_EQ(readText(dir / "mine/notes.txt"), "keep me");
  EXPECT_EQ(entries(dir.path), std::vector<std::string>{"mine"});
  writeText(dir / "file", "x");
  EXPECT_ERROR(writeCheckpoint(dir / "file", sample(1, 1)),
               {"exists and is not a folder"});
  EXPECT_ERROR(writeCheckpoint(".", sample(1, 1)), {"name a subfolder"});
  // An empty folder may become one.
  fs::create_directories(dir / "empty");
  writeCheckpoint(dir / "empty", sample(1, 1));
  EXPECT_TRUE(hasCheckpoint(dir / "empty"));
}

// Folders named like a write's leftovers but not made by one (a user's
// backup `ckpt.old.1`), and a folder with some other manifest.json, are
// neither read, removed nor replaced.
TEST(Checkpoint, LeavesLookAlikesAlone) {
  TempDir dir;
  Checkpoint a = sample(3, 1);
  writeCheckpoint(dir / "ckpt", a);
  fs::rename(dir / "ckpt", dir / "backup");
  fs::remove(dir / "backup/.stepjit-checkpoint-write");
  fs::rename(dir / "backup", dir / "ckpt.old.1");
  fs::create_directories(dir / "ckpt.tmp.2");
  writeText(dir / "ckpt.tmp.2/notes.txt", "keep me");
  // ckpt is missing, and ckpt.old.1 is the user's: no checkpoint to resume.
  EXPECT_FALSE(hasCheckpoint(dir / "ckpt"));
  EXPECT_ERROR(readCheckpoint(dir / "ckpt"), {"no manifest.json"});
  Checkpoint b = sample(4, 2);
  writeCheckpoint(dir / "ckpt", b);
  expectSame(b, readCheckpoint(dir / "ckpt"));
  EXPECT_EQ(entries(dir.path),
            (std::vector<std::string>{"ckpt", "ckpt.old.1", "ckpt.tmp.2"}));
  EXPECT_EQ(readText(dir / "ckpt.tmp.2/notes.txt"), "keep me");
  expectSame(a, readCheckpoint(dir / "ckpt.old.1"));

  fs::create_directories(dir / "other");
  writeText(dir / "other/manifest.json", R"({"format": "something-else"})");
  EXPECT_FALSE(hasCheckpoint(dir / "other"));
  EXPECT_ERROR(writeCheckpoint(dir / "other", b),
               {"holds no checkpoint", "refusing to replace it"});
  EXPECT_EQ(readText(dir / "other/manifest.json"),
            R"({"format": "something-else"})");
}

TEST(Checkpoint, DamageIsFoundAndNamed) {
  TempDir dir;
  writeCheckpoint(dir / "c", sample(3, 1));
  std::string good = readText(dir / "c/w.npy");

  // One flipped bit in the data.
  std::string bad = good;
  bad.back() ^= 1;
  writeText(dir / "c/w.npy", bad);
  EXPECT_ERROR(readCheckpoint(dir / "c"),
               {"w.npy", "checksum", "differs from the manifest"});
  // Truncated.
  writeText(dir / "c/w.npy", good.substr(0, good.size() - 4));
  std::string sizes = "has " + std::to_string(good.size() - 4) +
                      " bytes, the manifest says " +
                      std::to_string(good.size());
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"w.npy", sizes.c_str()});
  // Missing.
  fs::remove(dir / "c/w.npy");
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"cannot open", "w.npy"});
  writeText(dir / "c/w.npy", good);
  EXPECT_EQ(readCheckpoint(dir / "c").step, 3);

  // Manifests that are not ours, or not this version, or that point out
  // of the folder.
  std::string manifest = readText(dir / "c/manifest.json");
  auto withManifest = [&](nlohmann::json m) {
    writeText(dir / "c/manifest.json", m.dump());
  };
  writeText(dir / "c/manifest.json", "{not json");
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"manifest.json is not JSON"});
  nlohmann::json m = nlohmann::json::parse(manifest);
  m["version"] = kCheckpointVersion + 1;
  withManifest(m);
  std::string found = "version " + std::to_string(kCheckpointVersion + 1),
              reads = "reads version " + std::to_string(kCheckpointVersion);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {found.c_str(), reads.c_str()});
  m = nlohmann::json::parse(manifest);
  m["format"] = "other";
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"format is not"});
  m = nlohmann::json::parse(manifest);
  m["tensors"]["w"]["file"] = "../w.npy";
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"'../w.npy' is outside"});
  m = nlohmann::json::parse(manifest);
  m["tensors"]["w"]["shape"] = {4};
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"),
               {"w.npy is f32 [2, 2], the manifest says f32 [4]"});
  m = nlohmann::json::parse(manifest);
  m["tensors"]["w"].erase("fnv1a64");
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"tensor 'w'", "fnv1a64"});
  // Integer fields that are not JSON integers in range: refused by name
  // (converting 1e30 to int64 would be undefined behaviour).
  m = nlohmann::json::parse(manifest);
  m["step"] = 1e30;
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"\"step\" is 1e+30",
                                           "expected an integer >= 0"});
  m = nlohmann::json::parse(manifest);
  m["step"] = -1;
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"\"step\" is -1"});
  m = nlohmann::json::parse(manifest);
  m["tensors"]["w"]["bytes"] = 18446744073709551615ull;
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"),
               {"tensor 'w'", "\"bytes\" is 18446744073709551615"});
  m = nlohmann::json::parse(manifest);
  m["tensors"]["w"]["shape"] = {2.5, 2};
  withManifest(m);
  EXPECT_ERROR(readCheckpoint(dir / "c"), {"tensor 'w'", "\"shape\" is 2.5"});
}

TEST(Checkpoint, SessionResumesBitIdentically) {
  TempDir dir;
  Session s(sgdStep());
  s.set("w", make(F32, {3}, {1, -1, 0.5}));
  s.step({{"x", batchX()}});
  s.step({{"x", batchX()}});
  EXPECT_EQ(s.stepsDone(), 2);
  s.save(dir / "ckpt", {{"next_batch", 1}});

  Session resumed(sgdStep());
  Checkpoint info = resumed.load(dir / "ckpt");
  EXPECT_EQ(info.step, 2);
  EXPECT_EQ(info.data, nlohmann::json({{"next_batch", 1}}));
  EXPECT_TRUE(info.tensors.empty());
  EXPECT_EQ(resumed.stepsDone(), 2);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(s.step({{"x", batchX()}}), resumed.step({{"x", batchX()}}));
  for (const char *name : {"w", "w.momentum", "step"})
    EXPECT_TRUE(s.get(name).bitwiseEqual(resumed.get(name))) << name;
  EXPECT_EQ(resumed.stepsDone(), 5);
}

TEST(Checkpoint, SessionLoadRefusesOtherModelsChangingNothing) {
  TempDir dir;
  Session s(sgdStep());
  s.set("w", make(F32, {3}, {1, 2, 3}));
  // Missing parent folders are made.
  s.save(dir / "a/b/ckpt");
  EXPECT_EQ(readCheckpoint(dir / "a/b/ckpt").step, 0);
  Session fresh(sgdStep());
  EXPECT_ERROR(fresh.save(dir / "c"), {"param 'w' has no value"});
  EXPECT_FALSE(fs::exists(dir / "c"));

  s.step({{"x", batchX()}});
  auto expectUnchanged = [&]() {
    expectValues(s.get("w"), F32, {3}, {0.5, 1.3, 2.1});
    EXPECT_EQ(s.stepsDone(), 1);
  };
  Checkpoint c;
  c.step = 9;
  c.tensors["w"] = make(F32, {3}, {9, 9, 9});
  c.tensors["w.momentum"] = make(F32, {3}, {0, 0, 0});
  writeCheckpoint(dir / "missing", c);
  EXPECT_ERROR(s.load(dir / "missing"),
               {"has no tensor 'step'", "another model or optimizer"});
  expectUnchanged();

  c.tensors["step"] = make(I64, {}, {9});
  c.tensors["adam.m"] = make(F32, {3}, {0, 0, 0});
  writeCheckpoint(dir / "extra", c);
  EXPECT_ERROR(s.load(dir / "extra"),
               {"holds tensors this step does not have: adam.m"});
  expectUnchanged();

  c.tensors.erase("adam.m");
  c.tensors["w"] = make(F32, {4}, {9, 9, 9, 9});
  writeCheckpoint(dir / "shape", c);
  EXPECT_ERROR(s.load(dir / "shape"),
               {"param 'w' expects f32 [3], found f32 [4]"});
  expectUnchanged();

  EXPECT_ERROR(s.load(dir / "nothing"), {"not a complete checkpoint"});
  expectUnchanged();
}

} // namespace
} // namespace step::rt::test
