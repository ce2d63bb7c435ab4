//===- Artifact.h - The .step artifact file ---------------------*- C++ -*-===//
//
// One file per compiled model (format in docs/artifact.md):
//
//   "STEPJIT\0"  magic, 8 bytes
//   u32 version (kArtifactVersion), u32 reserved (0)
//   u64 manifest bytes M, u64 payload bytes P
//   M bytes: the manifest, JSON (plan, signature, sections, options, ...)
//   P bytes: the payload; sections are byte ranges of it, named by the
//            manifest ("constants", "cubin.sm_90", "ptx", ...)
//   u64 checksum: FNV-1a 64 of every byte before it
//
// All integers little-endian. The reader refuses a wrong magic, version,
// size or checksum with an Error naming the file and what was expected.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_ARTIFACT_H
#define STEP_RUNTIME_ARTIFACT_H

#include "runtime/Plan.h"

#include <map>
#include <string>
#include <vector>

namespace step::rt {

constexpr uint32_t kArtifactVersion = 1;

struct Artifact {
  Plan plan;
  /// Everything else the compiler records: "options", "source_hash",
  /// "kernels", "archs", ... (free-form, kept verbatim).
  nlohmann::json meta = nlohmann::json::object();
  /// Binary sections by name.
  std::map<std::string, std::string> sections;
  /// A model with symbolic dims compiled for several buckets
  /// (docs/dynamic-shapes.md): this artifact is the largest bucket, these
  /// are the others, each complete (its own plan, constants and kernels,
  /// meta "bucket" giving its sizes). On disk each is the bytes of an
  /// artifact file in section "bucket.<i>".
  std::vector<Artifact> buckets;
};

/// FNV-1a 64 of `n` bytes.
uint64_t fnv1a64(const void *data, size_t n);

/// What is wrong with the meta fields the runtime reads (Session: "shard"
/// when it starts, "dynamic" and "bucket" when it picks a bucket,
/// "source_hash" in checkpoints), "" if nothing. parseArtifact refuses an
/// artifact with a defect; a Session over one in memory checks it too.
std::string metaDefect(const nlohmann::json &meta);

/// Writes the artifact atomically (temporary file + rename).
void writeArtifact(const std::string &path, const Artifact &artifact);
/// Reads and validates an artifact; throws Error on any defect.
Artifact readArtifact(const std::string &path);
/// The bytes of an artifact file, and their inverse (`what` names the
/// source in errors).
std::string artifactBytes(const Artifact &artifact);
Artifact parseArtifact(const std::string &bytes, const std::string &what);

} // namespace step::rt

#endif // STEP_RUNTIME_ARTIFACT_H
