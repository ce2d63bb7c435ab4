//===- MatmulTuneCacheTest.cpp - Tuned cuBLASLt picks kept on disk --------===//
//
// runtime/cuda/MatmulTuneCache.h without a GPU: picks survive a new cache
// object (a later process) in their scope only, every 64-bit word round
// trips, two processes' saves merge, a broken or foreign file is ignored
// (never a failure), nothing is written when nothing was added, a save
// that cannot write warns instead of throwing, and no temporary file is
// left behind (runtime/CacheFiles.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/CacheFiles.h"
#include "runtime/Tensor.h"
#include "runtime/cuda/MatmulTuneCache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {
namespace fs = std::filesystem;
using step::rt::cuda::MatmulTuneCache;

const char *kScope = "NVIDIA H200, sm_90, cuBLASLt 130000";

/// A fresh folder under the test's temporary directory.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("step-tune-cache-" + std::to_string(::getpid()) + "-" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string &name) const {
    return (path / name).string();
  }
};

MatmulTuneCache::Algo algo(uint64_t seed) {
  MatmulTuneCache::Algo a;
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = seed * 0x9e3779b97f4a7c15ULL + i;
  return a;
}

void writeText(const std::string &path, const std::string &text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(MatmulTuneCache, PicksSurviveInTheirScopeOnly) {
  TempDir dir;
  std::string path = dir.file("nested/cublaslt-tuned.json");
  MatmulTuneCache::Algo edge = algo(1);
  edge[0] = ~uint64_t(0); // every bit of a word
  edge[1] = 0;
  {
    MatmulTuneCache c(path, kScope);
    EXPECT_FALSE(c.find("bf16,8192,2304,768"));
    c.put("bf16,8192,2304,768", edge);
    c.put("bf16,8192,768,3072", algo(2));
    EXPECT_EQ(c.find("bf16,8192,2304,768"), edge);
    c.save();
  }
  ASSERT_TRUE(fs::exists(path));
  MatmulTuneCache again(path, kScope);
  EXPECT_EQ(again.find("bf16,8192,2304,768"), edge);
  EXPECT_EQ(again.find("bf16,8192,768,3072"), algo(2));
  EXPECT_FALSE(again.find("bf16,1,1,1"));
  // Another device or cuBLASLt: none of them.
  MatmulTuneCache other(path, "NVIDIA H100 80GB HBM3, sm_90, cuBLASLt 130000");
  EXPECT_FALSE(other.find("bf16,8192,2304,768"));
}

TEST(MatmulTuneCache, TwoProcessesSavesMerge) {
  TempDir dir;
  std::string path = dir.file("t.json");
  MatmulTuneCache a(path, kScope), b(path, kScope);
  MatmulTuneCache h100(path, "H100");
  a.put("k1", algo(1));
  a.save();
  b.put("k2", algo(2));
  b.save(); // reads k1 from the file first
  h100.put("k1", algo(3));
  h100.save();
  MatmulTuneCache read(path, kScope);
  EXPECT_EQ(read.find("k1"), algo(1));
  EXPECT_EQ(read.find("k2"), algo(2));
  EXPECT_EQ(MatmulTuneCache(path, "H100").find("k1"), algo(3));
}

TEST(MatmulTuneCache, BrokenOrForeignFilesAreIgnoredThenReplaced) {
  TempDir dir;
  for (const char *text :
       {"not json at all", "{\"format\": \"other\", \"entries\": {}}",
        "{\"format\": \"stepjit-cublaslt-tuned-1\", \"entries\": "
        "{\"s | k\": [\"1\", \"2\"]}}",
        "{\"format\": \"stepjit-cublaslt-tuned-1\", \"entries\": "
        "{\"s | k\": [\"zz\", \"0\", \"0\", \"0\", \"0\", \"0\", \"0\", "
        "\"0\"]}}",
        "[1, 2, 3]"}) {
    std::string path = dir.file("broken.json");
    writeText(path, text);
    MatmulTuneCache c(path, "s");
    EXPECT_FALSE(c.find("k")) << text;
    c.put("k", algo(5));
    c.save();
    EXPECT_EQ(MatmulTuneCache(path, "s").find("k"), algo(5)) << text;
    fs::remove(path);
  }
}

TEST(MatmulTuneCache, NothingAddedWritesNothing) {
  TempDir dir;
  std::string path = dir.file("t.json");
  {
    MatmulTuneCache c(path, kScope);
    c.save();
  }
  EXPECT_FALSE(fs::exists(path));
  MatmulTuneCache a(path, kScope);
  a.put("k", algo(6));
  a.save();
  auto before = fs::last_write_time(path);
  MatmulTuneCache b(path, kScope);
  b.put("k", algo(6)); // the same pick: nothing new
  b.save();
  EXPECT_EQ(fs::last_write_time(path), before);
}

TEST(MatmulTuneCache, ASaveThatCannotWriteWarnsAndGoesOn) {
  TempDir dir;
  fs::create_directories(dir.path);
  std::string blocker = dir.file("a-file");
  writeText(blocker, "x");
  // The cache's folder would have to be inside a regular file.
  MatmulTuneCache c(blocker + "/t.json", kScope);
  c.put("k", algo(7));
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(c.save());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not saved"), std::string::npos) << err;
}

TEST(CacheFiles, AtomicWriteLeavesOnlyTheFile) {
  TempDir dir;
  fs::create_directories(dir.path);
  std::string path = dir.file("f.bin");
  step::rt::writeFileAtomically(path, "first", "test");
  step::rt::writeFileAtomically(path, "second, longer", "test");
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), "second, longer");
  int files = 0;
  for (auto &e : fs::directory_iterator(dir.path))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_THROW(step::rt::writeFileAtomically(dir.file("no/such/dir/f"), "x",
                                             "test"),
               step::rt::Error);
}

TEST(CacheFiles, DefaultCacheDirFollowsXdgThenHome) {
  std::string xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(step::rt::defaultCacheDir(), "/x/cache/stepjit");
  ::unsetenv("XDG_CACHE_HOME");
  if (const char *home = std::getenv("HOME"); home && *home) {
    EXPECT_EQ(step::rt::defaultCacheDir(),
              (fs::path(home) / ".cache" / "stepjit").string());
  }
  if (!xdg.empty())
    ::setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
}

} // namespace
