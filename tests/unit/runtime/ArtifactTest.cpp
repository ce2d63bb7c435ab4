//===- ArtifactTest.cpp - The .step file: round trip and refusals ---------===//

#include "runtime/Artifact.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

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
  p.steps = {
      {"step.exp", nlohmann::json::object(), {0}, {2}, "", "", nullptr},
      {"step.add", nlohmann::json::object(), {2, 1}, {3}, "", "", nullptr}};
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

/// The bytes of an artifact file around `manifest` and `payload`, framed
/// as docs/artifact.md says, with a correct checksum: the reader's checks
/// past the checksum see exactly this manifest.
std::string framed(const std::string &manifest, const std::string &payload) {
  std::string out("STEPJIT\0", 8);
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(kArtifactVersion, 4);
  put(0, 4);
  put(manifest.size(), 8);
  put(payload.size(), 8);
  out += manifest + payload;
  put(fnv1a64(out.data(), out.size()), 8);
  return out;
}

nlohmann::json manifestOf(const Artifact &a, nlohmann::json sections) {
  return {{"format", "stepjit-artifact"},
          {"version", kArtifactVersion},
          {"plan", toJson(a.plan)},
          {"meta", a.meta},
          {"sections", std::move(sections)}};
}

std::string errorParsing(const std::string &bytes) {
  try {
    parseArtifact(bytes, "crafted.step");
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

// The reader past the checksum (hardened with the fuzz targets,
// tests/fuzz): inputs that pass the checksum and break the manifest.
TEST(Artifact, SectionRangeCannotWrapAround) {
  // offset + size wraps to 1: once an out-of-range read (std::out_of_range).
  nlohmann::json sections = nlohmann::json::array(
      {{{"name", "constants"},
        {"offset", std::numeric_limits<uint64_t>::max()},
        {"size", 2}}});
  std::string bytes =
      framed(manifestOf(smallArtifact(), sections).dump(), "0123");
  EXPECT_NE(errorParsing(bytes).find(
                "section 'constants' lies outside the payload"),
            std::string::npos);
}

TEST(Artifact, MalformedManifestIsAnError) {
  // Each was once a nlohmann::json exception escaping the reader.
  EXPECT_NE(errorParsing(framed("[1, 2]", "")).find(
                "the manifest is not a JSON object"),
            std::string::npos);
  nlohmann::json m = manifestOf(smallArtifact(), nlohmann::json::array());
  m["sections"] = 7;
  EXPECT_NE(errorParsing(framed(m.dump(), "")).find("malformed manifest"),
            std::string::npos);
  m["sections"] = nlohmann::json::array({{{"name", 3}}});
  EXPECT_NE(errorParsing(framed(m.dump(), "")).find("malformed manifest"),
            std::string::npos);
  m.erase("plan");
  EXPECT_NE(errorParsing(framed(m.dump(), "")).find("malformed manifest"),
            std::string::npos);
}

TEST(Artifact, IntegerFieldsMustBeIntegers) {
  // A number past uint64 parses as a double; converting it to int64 was
  // undefined behaviour (UBSan in fuzz-artifact, corpus float-size-field).
  auto planError = [](const char *key, nlohmann::json value, bool inBuffer) {
    nlohmann::json plan = toJson(smallArtifact().plan);
    (inBuffer ? plan["buffers"][2] : plan)[key] = std::move(value);
    try {
      planFromJson(plan);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected an Error";
    return std::string();
  };
  EXPECT_NE(planError("shape", nlohmann::json::parse("[92233720368547758074, 3]"),
                      true)
                .find("a shape 9.223372036854776e+19 is not a 64-bit integer"),
            std::string::npos);
  EXPECT_NE(planError("offset", 1.5, true).find("an offset 1.5 is not"),
            std::string::npos);
  EXPECT_NE(planError("offset", std::numeric_limits<uint64_t>::max(), true)
                .find("18446744073709551615 is not a 64-bit integer"),
            std::string::npos);
  EXPECT_NE(planError("arena_bytes", "272", false).find("arena_bytes"),
            std::string::npos);
  EXPECT_NE(planError("arguments", 0, false).find("is not an array"),
            std::string::npos);
  nlohmann::json sections = nlohmann::json::array(
      {{{"name", "constants"}, {"offset", -1}, {"size", 2}}});
  EXPECT_NE(errorParsing(framed(manifestOf(smallArtifact(), sections).dump(),
                                "0123"))
                .find("not a byte count"),
            std::string::npos);
}

TEST(Artifact, DeepManifestIsRefused) {
  nlohmann::json m = manifestOf(smallArtifact(), nlohmann::json::array());
  std::string text = m.dump();
  // "meta": [[[...]]] 100 levels deep (copying it would recurse per level).
  text.insert(text.size() - 1, ",\"deep\":" + std::string(100, '[') +
                                   std::string(100, ']'));
  EXPECT_NE(errorParsing(framed(text, "")).find(
                "the manifest nests deeper than 64 levels"),
            std::string::npos);
}

TEST(Artifact, MetaOfTheWrongTypeIsRefused) {
  // Each once reached Session's constructor or step and threw a
  // nlohmann::json type error there (tests/fuzz/corpus/artifact/meta-*).
  auto refused = [](nlohmann::json meta) {
    Artifact a = smallArtifact();
    a.meta = std::move(meta);
    return errorParsing(artifactBytes(a));
  };
  EXPECT_NE(refused({{"shard", 5}}).find("meta \"shard\" is not"),
            std::string::npos);
  EXPECT_NE(refused({{"shard", {{"world_size", "two"}}}})
                .find("meta \"shard\" is not"),
            std::string::npos);
  EXPECT_NE(refused({{"shard", {{"world_size", 2}, {"sharded", {{"w", "x"}}}}}})
                .find("meta \"shard\" is not"),
            std::string::npos);
  EXPECT_NE(refused({{"source_hash", 7}}).find("\"source_hash\" is not a string"),
            std::string::npos);
  nlohmann::json dynamic = {{"symbols", {{"T", 8}}},
                            {"inputs", {{"x", {"T", "U"}}}}};
  EXPECT_NE(refused({{"dynamic", dynamic}, {"bucket", {{"T", 8}}}})
                .find("input 'x' names an undeclared symbol"),
            std::string::npos);
  dynamic["inputs"]["x"] = {"T", ""};
  EXPECT_NE(refused({{"dynamic", dynamic}, {"bucket", {{"U", 8}}}})
                .find("a bucket has no size for symbol 'T'"),
            std::string::npos);
  EXPECT_NO_THROW(parseArtifact(
      artifactBytes([&] {
        Artifact a = smallArtifact();
        a.meta = {{"dynamic", dynamic}, {"bucket", {{"T", 8}}}};
        return a;
      }()),
      "ok"));
}

// Tensor parallelism's keys of meta "shard": "tp" an integer >= 1 that
// divides world_size, "tp_split" entries {dim, groups, shape} whose dim is
// in range and splits into groups x tp; each defect is named.
TEST(Artifact, TensorParallelMetaIsChecked) {
  using nlohmann::json;
  json split = {{"w", {{"dim", 1}, {"groups", 3}, {"shape", {2, 6}}}}};
  auto shardWith = [&](json tp, json tpSplit) {
    json shard = {{"world_size", 4}, {"sharded", json::object()}};
    if (!tp.is_null())
      shard["tp"] = std::move(tp);
    if (!tpSplit.is_null())
      shard["tp_split"] = std::move(tpSplit);
    Artifact a = smallArtifact();
    a.meta = {{"shard", shard}};
    return a;
  };
  auto refused = [&](json tp, json tpSplit) {
    return errorParsing(artifactBytes(shardWith(std::move(tp),
                                                std::move(tpSplit))));
  };
  auto expectIn = [](const std::string &e, const std::string &part) {
    EXPECT_NE(e.find(part), std::string::npos)
        << "\"" << e << "\" lacks \"" << part << "\"";
  };
  // Accepted: tp 2 of 4 ranks, [2, 6] split along dim 1 in 3 groups x 2;
  // tp 4; no tp at all (1), where dim 1 only has to split into the groups.
  Artifact ok = parseArtifact(artifactBytes(shardWith(2, split)), "ok");
  EXPECT_EQ(ok.meta["shard"]["tp"], 2);
  EXPECT_NO_THROW(parseArtifact(
      artifactBytes(shardWith(
          4, {{"w", {{"dim", 0}, {"groups", 1}, {"shape", {8, 3}}}}})),
      "ok"));
  EXPECT_NO_THROW(parseArtifact(artifactBytes(shardWith(nullptr, split)), "ok"));
  EXPECT_NO_THROW(parseArtifact(artifactBytes(shardWith(1, nullptr)), "ok"));

  std::string e = refused("two", split);
  expectIn(e, "crafted.step: not a valid StepJIT artifact");
  expectIn(e, "meta \"shard\": \"tp\" is \"two\", expected an integer >= 1");
  expectIn(refused(0, split), "\"tp\" is 0, expected an integer >= 1");
  expectIn(refused(1.5, split), "\"tp\" is 1.5, expected an integer >= 1");
  expectIn(refused(3, nullptr), "\"tp\" 3 does not divide world_size 4");
  expectIn(refused(8, nullptr), "\"tp\" 8 does not divide world_size 4");

  expectIn(refused(2, 5), "\"tp_split\" is not {name: {\"dim\": k");
  expectIn(refused(2, {{"w", 5}}), "\"tp_split\" 'w' is number, expected");
  expectIn(refused(2, {{"w", {{"groups", 1}, {"shape", {2, 6}}}}}),
           "\"tp_split\" 'w': \"dim\" is missing, expected an integer");
  expectIn(refused(2, {{"w", {{"dim", 0.5}, {"groups", 1}, {"shape", {2}}}}}),
           "'w': \"dim\" is 0.5, expected an integer");
  expectIn(refused(2, {{"w", {{"dim", 0}, {"groups", "3"}, {"shape", {2}}}}}),
           "'w': \"groups\" is \"3\", expected an integer");
  expectIn(refused(2, {{"w", {{"dim", 0}, {"groups", 1}}}}),
           "'w': \"shape\" is missing, expected the full shape");
  expectIn(refused(2, {{"w", {{"dim", 0}, {"groups", 1}, {"shape", {-2}}}}}),
           "'w': \"shape\" is [-2], expected the full shape");
  expectIn(refused(2, {{"w", {{"dim", 2}, {"groups", 1}, {"shape", {2, 6}}}}}),
           "'w': dim 2 is out of range for its shape [2, 6] (expected 0..1)");
  expectIn(refused(2, {{"w", {{"dim", -1}, {"groups", 1}, {"shape", {2, 6}}}}}),
           "'w': dim -1 is out of range");
  expectIn(refused(2, {{"w", {{"dim", 1}, {"groups", 0}, {"shape", {2, 6}}}}}),
           "'w': groups is 0, expected an integer >= 1");
  // 6 columns do not split into 3 groups x 4 ranks, nor 2 rows into 2.
  e = refused(4, split);
  expectIn(e, "'w': dim 1 of [2, 6] has size 6, expected a multiple of "
              "groups 3 x tp 4");
  expectIn(refused(2, {{"w", {{"dim", 0}, {"groups", 3}, {"shape", {2, 6}}}}}),
           "dim 0 of [2, 6] has size 2, expected a multiple of groups 3 x tp 2");
  // A tensor is either ZeRO's blocks or tensor-parallel parts.
  Artifact both = shardWith(2, split);
  both.meta["shard"]["sharded"] = {{"w", {12}}};
  expectIn(errorParsing(artifactBytes(both)),
           "'w' is in both \"sharded\" and \"tp_split\"");
  // metaDefect is the same check, for artifacts made in memory.
  EXPECT_EQ(metaDefect(shardWith(2, split).meta), "");
  expectIn(metaDefect(shardWith(3, split).meta), "does not divide");
}

TEST(Artifact, BucketsDoNotNest) {
  Artifact inner = smallArtifact();
  Artifact middle = smallArtifact();
  middle.buckets.push_back(inner);
  Artifact outer = smallArtifact();
  outer.buckets.push_back(middle);
  std::string bytes = artifactBytes(outer);
  EXPECT_NE(errorParsing(bytes).find("a bucket has buckets of its own"),
            std::string::npos);
  outer.buckets = {inner}; // one level, as stepc --buckets writes
  EXPECT_EQ(parseArtifact(artifactBytes(outer), "ok").buckets.size(), 1u);
}

TEST(Artifact, PlanSizesCannotOverflow) {
  auto errorValidating = [](const Artifact &a) {
    try {
      a.plan.validate();
    } catch (const Error &e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected an Error";
    return std::string();
  };
  Artifact a = smallArtifact();
  a.plan.buffers[0].shape = {-4};
  EXPECT_NE(errorValidating(a).find("'x' has a negative dimension"),
            std::string::npos);
  // 2^62 elements of 4 bytes: bytes() would overflow int64.
  a = smallArtifact();
  a.plan.buffers[0].shape = {int64_t(1) << 31, int64_t(1) << 31};
  EXPECT_NE(errorValidating(a).find("'x' of shape [2147483648, 2147483648] "
                                    "has too many elements"),
            std::string::npos);
  // offset + bytes wraps below the arena size: once accepted.
  a = smallArtifact();
  a.plan.buffers[3].offset = std::numeric_limits<int64_t>::max() - 8;
  EXPECT_NE(errorValidating(a).find("is outside the arena"),
            std::string::npos);
  a = smallArtifact();
  a.plan.hostBytes = std::numeric_limits<int64_t>::min();
  EXPECT_NE(errorValidating(a).find("negative host arena size"),
            std::string::npos);
}

TEST(Artifact, FusionBodiesDoNotNest) {
  nlohmann::json body = {{"function", "fusion"},
                         {"buffers", nlohmann::json::array()},
                         {"steps", nlohmann::json::array()},
                         {"arguments", nlohmann::json::array()},
                         {"results", nlohmann::json::array()},
                         {"result_names", nlohmann::json::array()},
                         {"arena_bytes", 0}};
  nlohmann::json fusion = {{"op", "step.fusion"},
                           {"attrs", nlohmann::json::object()},
                           {"operands", nlohmann::json::array()},
                           {"results", nlohmann::json::array()},
                           {"body", body}};
  nlohmann::json nested = body;
  nested["steps"] = nlohmann::json::array({fusion});
  fusion["body"] = nested;
  nlohmann::json plan = toJson(smallArtifact().plan);
  plan["steps"].push_back(fusion);
  try {
    planFromJson(plan);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "a fusion body holds another fusion body"),
              std::string::npos);
  }
}

TEST(Artifact, ChecksumIsFnv1a64) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

} // namespace
