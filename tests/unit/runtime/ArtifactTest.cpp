//===- ArtifactTest.cpp - The .step file: round trip and refusals ---------===//

#include "runtime/Artifact.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace {
using namespace step::rt;
namespace fs = std::filesystem;

/// y = exp(x) + c, with c a constant: one input, one transient, one
/// constant, two steps.
Artifact smallArtifact() {
  Artifact a;
  Plan &p = a.plan;
  p.function = "f";
  p.buffers = {{"x", BufferKind::Input, DType::F32, {4}, -1},
               {"%1", BufferKind::Constant, DType::F32, {4}, 0},
               {"%2", BufferKind::Transient, DType::F32, {4}, 0},
               {"%3", BufferKind::Transient, DType::F32, {4}, 256}};
  p.steps = {{"step.exp", nlohmann::json::object(), {0}, {2}, ""},
             {"step.add", nlohmann::json::object(), {2, 1}, {3}, ""}};
  p.arguments = {0};
  p.results = {3};
  p.resultNames = {"y"};
  p.arenaBytes = 272;
  a.sections["constants"] = std::string(16, '\x01');
  a.sections["ptx"] = "// ptx";
  a.meta = {{"source_hash", "abc"}};
  return a;
}

std::string tempPath(const std::string &name) {
  return (fs::temp_directory_path() /
          ("stepjit-artifact-test-" + std::to_string(::getpid()) + name))
      .string();
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

void spit(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string errorReading(const std::string &path) {
  try {
    readArtifact(path);
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

TEST(Artifact, RoundTrip) {
  std::string path = tempPath("round.step");
  writeArtifact(path, smallArtifact());
  Artifact b = readArtifact(path);
  EXPECT_EQ(nlohmann::json(toJson(b.plan)), toJson(smallArtifact().plan));
  EXPECT_EQ(b.sections, smallArtifact().sections);
  EXPECT_EQ(b.meta["source_hash"], "abc");
  fs::remove(path);
}

TEST(Artifact, RefusesWrongMagicVersionChecksumAndSize) {
  std::string path = tempPath("bad.step");
  writeArtifact(path, smallArtifact());
  const std::string good = slurp(path);

  std::string bytes = good;
  bytes[0] = 'X';
  spit(path, bytes);
  EXPECT_NE(errorReading(path).find("wrong magic"), std::string::npos);

  bytes = good;
  bytes[8] = 9; // version 9
  spit(path, bytes);
  EXPECT_NE(errorReading(path).find("format version 9, this runtime reads "
                                    "version 1"),
            std::string::npos);

  bytes = good;
  bytes[40] ^= 0x20; // a manifest byte
  spit(path, bytes);
  EXPECT_NE(errorReading(path).find("checksum mismatch"), std::string::npos);

  spit(path, good.substr(0, good.size() - 3));
  EXPECT_NE(errorReading(path).find("truncated or corrupt"),
            std::string::npos);

  fs::remove(path);
  EXPECT_NE(errorReading(path).find("cannot open"), std::string::npos);
}

TEST(Artifact, PlanValidationNamesTheDefect) {
  Artifact a = smallArtifact();
  a.plan.steps[1].operands = {3, 1}; // reads its own result
  try {
    writeArtifact(tempPath("never.step"), a);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "plan: step 1 (step.add) reads buffer '%3' before it is "
                 "written");
  }
  a = smallArtifact();
  a.plan.buffers[3].offset = 260; // past the arena
  EXPECT_THROW(a.plan.validate(), Error);
  EXPECT_FALSE(fs::exists(tempPath("never.step")));
}

TEST(Artifact, ChecksumIsFnv1a64) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

} // namespace
