//===- Artifact.cpp - Reading and writing .step files ---------------------===//

#include "runtime/Artifact.h"

#include "runtime/Npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace step::rt {

namespace {
constexpr char kArtifactMagic[8] = {'S', 'T', 'E', 'P', 'J', 'I', 'T', '\0'};
constexpr size_t kArtifactHeaderBytes = 8 + 4 + 4 + 8 + 8;

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
  std::string out(kArtifactMagic, sizeof kArtifactMagic);
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

namespace {
/// What is wrong with the tensor-parallel keys of meta "shard" ("tp",
/// "tp_split"; docs/distributed.md), "" if nothing. `shard` is an object
/// with an integer "world_size".
std::string tpDefect(const nlohmann::json &shard) {
  using nlohmann::json;
  int64_t world = shard["world_size"].get<int64_t>();
  int64_t tp = 1;
  if (shard.contains("tp")) {
    const json &t = shard["tp"];
    if (!t.is_number_integer() || t.get<int64_t>() < 1)
      return "\"tp\" is " + t.dump() + ", expected an integer >= 1";
    tp = t.get<int64_t>();
    if (world < 1 || world % tp != 0)
      return "\"tp\" " + std::to_string(tp) + " does not divide world_size " +
             std::to_string(world) +
             " (ranks are data-parallel replicas of tp ranks each)";
  }
  if (!shard.contains("tp_split"))
    return "";
  const json &split = shard["tp_split"];
  const char *form = "{name: {\"dim\": k, \"groups\": G, \"shape\": [full "
                     "shape]}}";
  if (!split.is_object())
    return "\"tp_split\" is not " + std::string(form);
  const json sharded = shard.value("sharded", json::object());
  for (const auto &[name, entry] : split.items()) {
    std::string where = "\"tp_split\" '" + name + "'";
    if (!entry.is_object())
      return where + " is " + std::string(entry.type_name()) +
             ", expected {\"dim\": k, \"groups\": G, \"shape\": [full "
             "shape]}";
    for (const char *key : {"dim", "groups"})
      if (!entry.contains(key) || !entry[key].is_number_integer())
        return where + ": \"" + key + "\" is " +
               (entry.contains(key) ? entry[key].dump() : "missing") +
               ", expected an integer";
    bool isShape = entry.contains("shape") && entry["shape"].is_array();
    for (const json &d : isShape ? entry["shape"] : json::array())
      isShape = isShape && d.is_number_integer() && d.get<int64_t>() >= 0;
    if (!isShape)
      return where + ": \"shape\" is " +
             (entry.contains("shape") ? entry["shape"].dump() : "missing") +
             ", expected the full shape (integers >= 0)";
    auto shape = entry["shape"].get<std::vector<int64_t>>();
    int64_t dim = entry["dim"].get<int64_t>();
    int64_t groups = entry["groups"].get<int64_t>();
    auto rank = static_cast<int64_t>(shape.size());
    if (dim < 0 || dim >= rank)
      return where + ": dim " + std::to_string(dim) +
             " is out of range for its shape " + shapeToString(shape) +
             " (expected 0.." + std::to_string(rank - 1) + ")";
    if (groups < 1)
      return where + ": groups is " + std::to_string(groups) +
             ", expected an integer >= 1";
    int64_t size = shape[static_cast<size_t>(dim)];
    // Two divisions, not size % (groups * tp), which can overflow.
    if (size % groups != 0 || (size / groups) % tp != 0)
      return where + ": dim " + std::to_string(dim) + " of " +
             shapeToString(shape) + " has size " + std::to_string(size) +
             ", expected a multiple of groups " + std::to_string(groups) +
             " x tp " + std::to_string(tp);
    if (sharded.is_object() && sharded.contains(name))
      return "'" + name + "' is in both \"sharded\" and \"tp_split\" (a "
             "tensor is split one way)";
  }
  return "";
}
} // namespace

// The meta fields the runtime reads have the types it reads them as, so a
// crafted file is refused here rather than failing deep inside a step.
std::string metaDefect(const nlohmann::json &meta) {
  using nlohmann::json;
  auto isShape = [](const json &j) {
    if (!j.is_array())
      return false;
    for (const json &d : j)
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return false;
    return true;
  };
  auto allOf = [](const json &j, auto pred) {
    if (!j.is_object())
      return false;
    for (const auto &[key, value] : j.items())
      if (!pred(value))
        return false;
    return true;
  };
  auto isInt = [](const json &j) { return j.is_number_integer(); };
  if (!meta.is_object())
    return "\"meta\" is not an object";
  if (meta.contains("source_hash") && !meta["source_hash"].is_string())
    return "meta \"source_hash\" is not a string";
  if (meta.contains("shard")) {
    const json &shard = meta["shard"];
    if (!shard.is_object() || !shard.contains("world_size") ||
        !shard["world_size"].is_number_integer() ||
        (shard.contains("sharded") && !allOf(shard["sharded"], isShape)))
      return "meta \"shard\" is not {\"world_size\": N, \"sharded\": "
             "{name: shape}}";
    std::string tp = tpDefect(shard);
    if (!tp.empty())
      return "meta \"shard\": " + tp;
  }
  if (meta.contains("dynamic")) {
    const json &dynamic = meta["dynamic"];
    auto isDims = [](const json &dims) {
      if (!dims.is_array())
        return false;
      for (const json &d : dims)
        if (!d.is_string())
          return false;
      return true;
    };
    if (!dynamic.is_object() || !allOf(dynamic.value("symbols", json()), isInt) ||
        !allOf(dynamic.value("inputs", json()), isDims))
      return "meta \"dynamic\" is not {\"symbols\": {S: max}, "
             "\"inputs\": {name: [dim symbols]}}";
    for (const auto &[name, dims] : dynamic["inputs"].items())
      for (const json &d : dims)
        if (!d.get<std::string>().empty() &&
            !dynamic["symbols"].contains(d.get<std::string>()))
          return "meta \"dynamic\": input '" + name +
                 "' names an undeclared symbol";
  }
  if (meta.contains("bucket") && !allOf(meta["bucket"], isInt))
    return "meta \"bucket\" is not {S: size}";
  return "";
}

namespace {

/// Every bucket of a model with symbolic dims gives a size to each symbol
/// (the runtime looks them up when it picks a bucket).
std::string bucketDefect(const nlohmann::json &dynamic,
                         const nlohmann::json &meta) {
  if (!dynamic.is_object())
    return "";
  const nlohmann::json &sizes = meta.value("bucket", nlohmann::json::object());
  for (const auto &[symbol, max] : dynamic["symbols"].items())
    if (!sizes.contains(symbol))
      return "a bucket has no size for symbol '" + symbol + "'";
  return "";
}

/// JSON nesting deeper than this is refused while parsing: the plan nests
/// about ten levels, and copying or printing a deeper tree recurses once
/// per level.
constexpr int kMaxManifestDepth = 64;

/// `nested`: this is a bucket of another artifact (which has no buckets).
Artifact parseArtifactAt(const std::string &bytes, const std::string &path,
                         bool nested) {
  auto fail = [&](const std::string &what) -> Error {
    return Error(path + ": not a valid StepJIT artifact: " + what);
  };
  if (bytes.size() < kArtifactHeaderBytes + 8 ||
      std::memcmp(bytes.data(), kArtifactMagic, sizeof kArtifactMagic) != 0)
    throw fail("wrong magic (expected \"STEPJIT\\0\" at offset 0)");
  auto version = static_cast<uint32_t>(getLE(bytes, 8, 4));
  if (version != kArtifactVersion)
    throw fail("format version " + std::to_string(version) +
               ", this runtime reads version " +
               std::to_string(kArtifactVersion) +
               " (recompile the model with this stepc)");
  uint64_t manifestBytes = getLE(bytes, 16, 8);
  uint64_t payloadBytes = getLE(bytes, 24, 8);
  uint64_t expected = kArtifactHeaderBytes + manifestBytes + payloadBytes + 8;
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
    manifest = nlohmann::json::parse(
        bytes.substr(kArtifactHeaderBytes, manifestBytes),
        [&](int depth, nlohmann::json::parse_event_t, nlohmann::json &) {
          if (depth > kMaxManifestDepth)
            throw fail("the manifest nests deeper than " +
                       std::to_string(kMaxManifestDepth) + " levels");
          return true;
        });
  } catch (const nlohmann::json::exception &e) {
    throw fail(std::string("manifest is not JSON: ") + e.what());
  }
  if (!manifest.is_object())
    throw fail("the manifest is not a JSON object");
  size_t payloadAt = kArtifactHeaderBytes + manifestBytes;
  try {
    a.plan = planFromJson(manifest.at("plan"));
    a.plan.validate();
    a.meta = manifest.value("meta", nlohmann::json::object());
    std::string defect = metaDefect(a.meta);
    if (!defect.empty())
      throw fail(defect);
    for (const auto &s : manifest.at("sections")) {
      auto name = s.at("name").get<std::string>();
      // get<uint64_t> would convert a float or a negative number too.
      if (!s.at("offset").is_number_unsigned() ||
          !s.at("size").is_number_unsigned())
        throw fail("section '" + name +
                   "' has an offset or size that is not a byte count");
      auto offset = s.at("offset").get<uint64_t>();
      auto size = s.at("size").get<uint64_t>();
      // Two comparisons, not offset + size, which can wrap around.
      if (offset > payloadBytes || size > payloadBytes - offset)
        throw fail("section '" + name + "' lies outside the payload");
      a.sections[name] = bytes.substr(payloadAt + offset, size);
    }
  } catch (const nlohmann::json::exception &e) {
    throw fail(std::string("malformed manifest: ") + e.what());
  }
  for (size_t i = 0;; ++i) {
    auto it = a.sections.find("bucket." + std::to_string(i));
    if (it == a.sections.end())
      break;
    // The writer nests one level only; refusing deeper nesting bounds the
    // recursion a crafted file could ask for.
    if (nested)
      throw fail("a bucket has buckets of its own");
    a.buckets.push_back(parseArtifactAt(
        it->second, path + " (bucket " + std::to_string(i) + ")", true));
    a.sections.erase(it);
  }
  if (!nested && a.meta.contains("dynamic")) {
    std::string defect = bucketDefect(a.meta["dynamic"], a.meta);
    for (size_t i = 0; defect.empty() && i < a.buckets.size(); ++i)
      defect = bucketDefect(a.meta["dynamic"], a.buckets[i].meta);
    if (!defect.empty())
      throw fail(defect);
  }
  return a;
}
} // namespace

Artifact parseArtifact(const std::string &bytes, const std::string &path) {
  return parseArtifactAt(bytes, path, false);
}

} // namespace step::rt
