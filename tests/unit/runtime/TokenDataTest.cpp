//===- TokenDataTest.cpp - Token files, batches and the prefetcher --------===//
//
// Expected values are worked out here from the tokens written (0, 1, 2, ...
// or a known list), not by the code under test.
//
//===----------------------------------------------------------------------===//

#include "runtime/TokenData.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace step::rt;

namespace {
struct TokenDir {
  fs::path path;
  TokenDir() {
    path = fs::temp_directory_path() /
           ("step_tokens_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TokenDir() { fs::remove_all(path); }
};

std::vector<uint32_t> iota(uint32_t n, uint32_t mod) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i)
    v[i] = i % mod;
  return v;
}

std::string slurp(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void expectThrows(const std::function<void()> &f, const std::string &part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}
} // namespace

TEST(TokenFile, RoundTripsEachWidth) {
  TokenDir dir;
  for (int width : {1, 2, 4}) {
    std::vector<uint32_t> tokens = {0, 7, 255};
    if (width >= 2)
      tokens.push_back(65535);
    if (width == 4)
      tokens.push_back(70000);
    fs::path p = dir.path / ("w" + std::to_string(width) + ".tok");
    writeTokenFile(p.string(), tokens, width);
    EXPECT_EQ(fs::file_size(p), 32 + tokens.size() * width);
    TokenFile f(p.string());
    EXPECT_EQ(f.size(), static_cast<int64_t>(tokens.size()));
    EXPECT_EQ(f.bytesPerToken(), width);
    for (size_t i = 0; i < tokens.size(); ++i)
      EXPECT_EQ(f.at(static_cast<int64_t>(i)), tokens[i]) << width << " " << i;
  }
  // Little-endian, after the header: 65535 at width 2 is ff ff, 7 is 07 00.
  std::string bytes = slurp(dir.path / "w2.tok");
  EXPECT_EQ(bytes.substr(0, 8), "STEPTOK1");
  EXPECT_EQ(static_cast<uint8_t>(bytes[32 + 2]), 7);
  EXPECT_EQ(static_cast<uint8_t>(bytes[32 + 3]), 0);
}

TEST(TokenFile, RefusesWhatItCannotRead) {
  TokenDir dir;
  fs::path p = dir.path / "t.tok";
  expectThrows([&] { writeTokenFile(p.string(), {256}, 1); },
               "more than 1 byte(s) hold");
  EXPECT_FALSE(fs::exists(p)); // nothing half-written
  expectThrows([&] { writeTokenFile(p.string(), {1}, 3); }, "expected 1, 2 or 4");
  expectThrows([&] { TokenFile f((dir.path / "missing.tok").string()); },
               "cannot open it");

  writeTokenFile(p.string(), iota(10, 50), 2);
  std::string good = slurp(p);
  auto withBytes = [&](const std::string &bytes) {
    fs::path q = dir.path / "bad.tok";
    std::ofstream(q, std::ios::binary) << bytes;
    return q.string();
  };
  expectThrows([&] { TokenFile f(withBytes(good.substr(0, 20))); },
               "shorter than the 32-byte header");
  expectThrows([&] { TokenFile f(withBytes("NOTATOKN" + good.substr(8))); },
               "expected the magic STEPTOK1");
  std::string v2 = good;
  v2[8] = 2;
  expectThrows([&] { TokenFile f(withBytes(v2)); }, "format version 2");
  std::string w3 = good;
  w3[12] = 3;
  expectThrows([&] { TokenFile f(withBytes(w3)); }, "3 bytes per token");
  expectThrows([&] { TokenFile f(withBytes(good.substr(0, good.size() - 1))); },
               "truncated?");
}

TEST(TokenBatch, SequentialRowsAreConsecutiveWindows) {
  TokenDir dir;
  fs::path p = dir.path / "t.tok";
  writeTokenFile(p.string(), iota(100, 1000), 2);
  TokenFile f(p.string());
  BatchSpec spec;
  spec.batch = 2;
  spec.context = 4;
  spec.sequential = true;
  // Batch 3: rows start at (3 * 2 + r) * 4 = 24, 28.
  auto b = tokenBatch(f, spec, 3);
  ASSERT_EQ(b.at("tokens").shape(), (Shape{2, 4}));
  ASSERT_EQ(b.at("tokens").dtype(), DType::I64);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t t = 0; t < 4; ++t) {
      EXPECT_EQ(b.at("tokens").data<int64_t>()[r * 4 + t], 24 + 4 * r + t);
      EXPECT_EQ(b.at("targets").data<int64_t>()[r * 4 + t], 25 + 4 * r + t);
    }
  // Wrapping: 96 starts (100 - 4); batch 12 row 0 starts at 96 % 96 = 0.
  EXPECT_EQ(tokenBatch(f, spec, 12).at("tokens").data<int64_t>()[0], 0);
}

TEST(TokenBatch, RandomRowsAreWindowsOfTheFileAndSeeded) {
  TokenDir dir;
  fs::path p = dir.path / "t.tok";
  writeTokenFile(p.string(), iota(5000, 5000), 2);
  TokenFile f(p.string());
  BatchSpec spec;
  spec.batch = 8;
  spec.context = 16;
  spec.seed = 11;
  spec.dtype = DType::I32;
  auto a = tokenBatch(f, spec, 5), again = tokenBatch(f, spec, 5),
       other = tokenBatch(f, spec, 6);
  const int32_t *tok = a.at("tokens").data<int32_t>();
  const int32_t *tgt = a.at("targets").data<int32_t>();
  for (int64_t r = 0; r < 8; ++r) {
    // Token i of the file is i: a window is a run of consecutive numbers
    // whose last target exists.
    EXPECT_LE(tok[r * 16] + 16, 4999);
    for (int64_t t = 0; t < 16; ++t) {
      EXPECT_EQ(tok[r * 16 + t], tok[r * 16] + t);
      EXPECT_EQ(tgt[r * 16 + t], tok[r * 16 + t] + 1);
    }
  }
  EXPECT_EQ(std::memcmp(a.at("tokens").raw(), again.at("tokens").raw(),
                        a.at("tokens").byteSize()),
            0);
  EXPECT_NE(std::memcmp(a.at("tokens").raw(), other.at("tokens").raw(),
                        a.at("tokens").byteSize()),
            0);
  spec.seed = 12;
  EXPECT_NE(std::memcmp(a.at("tokens").raw(),
                        tokenBatch(f, spec, 5).at("tokens").raw(),
                        a.at("tokens").byteSize()),
            0);
  spec.context = 5000;
  expectThrows([&] { tokenBatch(f, spec, 0); }, "needs 5001");
}

TEST(Prefetcher, GivesTheSameBatchesAtAnyDepthAndFromAnyStart) {
  TokenDir dir;
  fs::path p = dir.path / "t.tok";
  writeTokenFile(p.string(), iota(3000, 256), 1);
  auto file = std::make_shared<const TokenFile>(p.string());
  BatchSpec spec;
  spec.batch = 4;
  spec.context = 32;
  spec.seed = 3;
  std::vector<std::vector<int64_t>> expected;
  for (int64_t k = 0; k < 12; ++k) {
    auto b = tokenBatch(*file, spec, k);
    const int64_t *t = b.at("tokens").data<int64_t>();
    expected.emplace_back(t, t + 4 * 32);
  }
  for (int depth : {0, 1, 2, 5}) {
    for (int64_t first : {int64_t(0), int64_t(7)}) {
      Prefetcher pre(file, spec, first, depth);
      for (int64_t k = first; k < 12; ++k) {
        EXPECT_EQ(pre.position(), k);
        auto b = pre.next();
        const int64_t *t = b.at("tokens").data<int64_t>();
        EXPECT_EQ(std::vector<int64_t>(t, t + 4 * 32), expected[k])
            << "depth " << depth << " batch " << k;
      }
      EXPECT_GE(pre.totalWait(), pre.lastWait());
    }
  }
}

TEST(Prefetcher, RefusesABadSpecOnTheCallersThread) {
  TokenDir dir;
  fs::path p = dir.path / "t.tok";
  writeTokenFile(p.string(), iota(10, 10), 1);
  auto file = std::make_shared<const TokenFile>(p.string());
  BatchSpec spec;
  spec.context = 64;
  expectThrows([&] { Prefetcher pre(file, spec); }, "needs 65");
  spec.context = 4;
  spec.dtype = DType::F32;
  expectThrows([&] { Prefetcher pre(file, spec); }, "must be i64 or i32");
}
