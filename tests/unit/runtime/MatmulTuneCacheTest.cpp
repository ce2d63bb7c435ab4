//===- MatmulTuneCacheTest.cpp - Tuned cuBLASLt picks kept on disk --------===//
//
// runtime/cuda/MatmulTuneCache.h without a GPU: picks survive a new cache
// object (a later process) in their scope only, every 64-bit word round
// trips, two processes' saves merge, a broken or foreign file is ignored
// (never a failure; a broken entry alone is dropped; a file of another
// format is left as it is), nothing is written when nothing was added, a
// save that cannot write warns instead of throwing, and no temporary file
// is left behind; the cache root (runtime/CacheFiles.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/CacheFiles.h"
#include "runtime/Tensor.h"
#include "runtime/cuda/MatmulTuneCache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {
namespace fs = std::filesystem;
using step::rt::cuda::MatmulTuneCache;

const char *kScope = "NVIDIA H200, sm_90, cuBLASLt 130000";

/// A fresh folder under the test's temporary directory.
struct TuneCacheDir {
  fs::path path;
  TuneCacheDir() {
    path = fs::temp_directory_path() /
           ("step-tune-cache-" + std::to_string(::getpid()) + "-" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TuneCacheDir() { fs::remove_all(path); }
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
  TuneCacheDir dir;
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
  TuneCacheDir dir;
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

TEST(MatmulTuneCache, BrokenFilesAreIgnoredThenReplaced) {
  TuneCacheDir dir;
  for (const char *text :
       {"not json at all", "[1, 2, 3]", "{\"format\": 7"}) {
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

TEST(MatmulTuneCache, ABrokenEntryAloneIsDropped) {
  TuneCacheDir dir;
  std::string path = dir.file("t.json");
  std::string zeros = "\"0000000000000000\"";
  std::string eight = zeros;
  for (int i = 1; i < 8; ++i)
    eight += ", " + zeros;
  // Words save() never writes: short, signed, spaced, prefixed, upper case.
  std::string entries = "\"s | good\": [" + eight + "]";
  int n = 0;
  for (const char *bad : {"\"1\"", "\"-000000000000001\"",
                          "\" 000000000000001\"", "\"0x00000000000001\"",
                          "\"000000000000000A\"", "7"})
    entries += ", \"s | bad" + std::to_string(n++) + "\": [" +
               std::string(bad) + eight.substr(zeros.size()) + "]";
  entries += ", \"s | short\": [" + zeros + "]";
  writeText(path, "{\"format\": \"stepjit-cublaslt-tuned-1\", \"entries\": {" +
                      entries + "}}");
  testing::internal::CaptureStderr();
  MatmulTuneCache c(path, "s");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.find("good"), MatmulTuneCache::Algo{});
  EXPECT_FALSE(c.find("short"));
  for (int i = 0; i < n; ++i)
    EXPECT_FALSE(c.find("bad" + std::to_string(i))) << i;
  EXPECT_NE(err.find("dropped"), std::string::npos) << err;
}

TEST(MatmulTuneCache, AFileOfAnotherFormatIsLeftAlone) {
  TuneCacheDir dir;
  std::string path = dir.file("t.json");
  std::string theirs = "{\"format\": \"stepjit-cublaslt-tuned-2\", "
                       "\"entries\": {}}";
  writeText(path, theirs);
  MatmulTuneCache c(path, "s");
  c.put("k", algo(8));
  testing::internal::CaptureStderr();
  c.save();
  std::string err = testing::internal::GetCapturedStderr();
  std::ifstream in(path);
  std::stringstream now;
  now << in.rdbuf();
  EXPECT_EQ(now.str(), theirs);
  EXPECT_NE(err.find("another format"), std::string::npos) << err;
}

TEST(MatmulTuneCache, NothingAddedWritesNothing) {
  TuneCacheDir dir;
  std::string path = dir.file("t.json");
  {
    MatmulTuneCache c(path, kScope);
    c.save();
  }
  EXPECT_FALSE(fs::exists(path));
  MatmulTuneCache a(path, kScope);
  a.put("k", algo(6));
  a.save();
  // A save replaces the file by a rename: a new inode. None here.
  struct stat before {}, after {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  MatmulTuneCache b(path, kScope);
  b.put("k", algo(6)); // the same pick: nothing new
  b.save();
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  b.put("k", algo(7)); // a new pick: a new file
  b.save();
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
}

TEST(MatmulTuneCache, ASaveThatCannotWriteWarnsAndGoesOn) {
  TuneCacheDir dir;
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

TEST(MatmulTuneCache, SavesLeaveNoTemporaryFiles) {
  TuneCacheDir dir;
  std::string path = dir.file("t.json");
  for (uint64_t i = 0; i < 3; ++i) {
    MatmulTuneCache c(path, kScope);
    c.put("k" + std::to_string(i), algo(i));
    c.save();
  }
  int files = 0;
  for (auto &e : fs::directory_iterator(dir.path))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

/// Sets (or, with nullptr, unsets) an environment variable for a scope.
struct EnvVar {
  std::string name;
  std::optional<std::string> old;
  EnvVar(const char *n, const char *value) : name(n) {
    if (const char *v = std::getenv(n))
      old = v;
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~EnvVar() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

TEST(CacheFiles, DefaultCacheDirFollowsXdgThenHomeThenTmp) {
  {
    EnvVar xdg("XDG_CACHE_HOME", "/x/cache");
    EXPECT_EQ(step::rt::defaultCacheDir(), "/x/cache/stepjit");
  }
  EnvVar xdg("XDG_CACHE_HOME", nullptr);
  {
    EnvVar home("HOME", "/h");
    EXPECT_EQ(step::rt::defaultCacheDir(), "/h/.cache/stepjit");
  }
  // Neither, and a temporary directory that does not exist: no throw.
  EnvVar home("HOME", nullptr), tmp("TMPDIR", "/no/such/folder");
  EXPECT_NO_THROW(EXPECT_FALSE(step::rt::defaultCacheDir().empty()));
}

} // namespace
