//===- Artifact.cpp - Reading and writing .step files ---------------------===//

#include "runtime/Artifact.h"

#include "runtime/Npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace step::rt {

namespace {
constexpr char kMagic[8] = {'S', 'T', 'E', 'P', 'J', 'I', 'T', '\0'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t getLE(const std::string &bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return v;
}
} // namespace

uint64_t fnv1a64(const void *data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto *p = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void writeArtifact(const std::string &path, const Artifact &artifact) {
  writeFileAtomic(path, artifactBytes(artifact), "writeArtifact");
}

std::string artifactBytes(const Artifact &artifact) {
  artifact.plan.validate();
  std::map<std::string, std::string> all = artifact.sections;
  for (size_t i = 0; i < artifact.buckets.size(); ++i)
    all["bucket." + std::to_string(i)] = artifactBytes(artifact.buckets[i]);
  std::string payload;
  nlohmann::json sections = nlohmann::json::array();
  for (const auto &[name, bytes] : all) {
    sections.push_back({{"name", name},
                        {"offset", payload.size()},
                        {"size", bytes.size()}});
    payload += bytes;
  }
  nlohmann::json manifest = {{"format", "stepjit-artifact"},
                             {"version", kArtifactVersion},
                             {"plan", toJson(artifact.plan)},
                             {"meta", artifact.meta},
                             {"sections", sections}};
  std::string text = manifest.dump();
  std::string out(kMagic, sizeof kMagic);
  putU32(out, kArtifactVersion);
  putU32(out, 0);
  putU64(out, text.size());
  putU64(out, payload.size());
  out += text;
  out += payload;
  putU64(out, fnv1a64(out.data(), out.size()));
  return out;
}

Artifact readArtifact(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path + ": cannot open the artifact");
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  return parseArtifact(bytes, path);
}

Artifact parseArtifact(const std::string &bytes, const std::string &path) {
  auto fail = [&](const std::string &what) -> Error {
    return Error(path + ": not a valid StepJIT artifact: " + what);
  };
  if (bytes.size() < kHeaderBytes + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw fail("wrong magic (expected \"STEPJIT\\0\" at offset 0)");
  auto version = static_cast<uint32_t>(getLE(bytes, 8, 4));
  if (version != kArtifactVersion)
    throw fail("format version " + std::to_string(version) +
               ", this runtime reads version " +
               std::to_string(kArtifactVersion) +
               " (recompile the model with this stepc)");
  uint64_t manifestBytes = getLE(bytes, 16, 8);
  uint64_t payloadBytes = getLE(bytes, 24, 8);
  uint64_t expected = kHeaderBytes + manifestBytes + payloadBytes + 8;
  if (manifestBytes > bytes.size() || payloadBytes > bytes.size() ||
      expected != bytes.size())
    throw fail("size " + std::to_string(bytes.size()) +
               " bytes does not match its header (" + std::to_string(expected) +
               "); the file is truncated or corrupt");
  uint64_t stored = getLE(bytes, bytes.size() - 8, 8);
  uint64_t actual = fnv1a64(bytes.data(), bytes.size() - 8);
  if (stored != actual)
    throw fail("checksum mismatch; the file is corrupt");

  Artifact a;
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(bytes.substr(kHeaderBytes, manifestBytes));
  } catch (const nlohmann::json::exception &e) {
    throw fail(std::string("manifest is not JSON: ") + e.what());
  }
  a.plan = planFromJson(manifest.at("plan"));
  a.plan.validate();
  a.meta = manifest.value("meta", nlohmann::json::object());
  size_t payloadAt = kHeaderBytes + manifestBytes;
  for (const auto &s : manifest.at("sections")) {
    auto offset = s.at("offset").get<uint64_t>();
    auto size = s.at("size").get<uint64_t>();
    if (offset + size > payloadBytes)
      throw fail("section '" + s.at("name").get<std::string>() +
                 "' lies outside the payload");
    a.sections[s.at("name").get<std::string>()] =
        bytes.substr(payloadAt + offset, size);
  }
  for (size_t i = 0;; ++i) {
    auto it = a.sections.find("bucket." + std::to_string(i));
    if (it == a.sections.end())
      break;
    a.buckets.push_back(
        parseArtifact(it->second, path + " (bucket " + std::to_string(i) + ")"));
    a.sections.erase(it);
  }
  return a;
}

} // namespace step::rt
