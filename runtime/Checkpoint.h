//===- Checkpoint.h - Training checkpoints that survive a crash -*- C++ -*-===//
//
// A checkpoint is a folder: one <name>.npy per tensor (params and optimizer
// state, the loss scaler's and the step counter's tensors among them, as
// full tensors, so any world size loads it) and manifest.json, which says
// what the folder holds: the format and its version, the steps completed,
// the caller's own record (step-run's data-loader position), and per file
// its dtype, shape, size and FNV-1a 64 checksum. A folder is a checkpoint
// only once its manifest is there, and the manifest is written last.
//
// Writing replaces the folder atomically:
//   1. everything goes to the sibling folder "<dir>.tmp.<pid>", each file
//      fsync'ed, the manifest last, then the folder itself fsync'ed;
//   2. renameat2(RENAME_EXCHANGE) swaps it with <dir> in one step (a plain
//      rename when <dir> does not exist yet), and the parent is fsync'ed;
//   3. the swapped-out old checkpoint is removed.
// A process killed at any moment therefore leaves <dir> either the previous
// complete checkpoint or the new one, never a mix; leftovers of an
// interrupted write ("<dir>.tmp.*", "<dir>.old.*") are removed by the next
// write. On a file system without RENAME_EXCHANGE the old folder is first
// renamed to "<dir>.old.<pid>"; a reader that finds no <dir> then takes
// that one, so the window in between is covered too.
//
// Reading verifies the manifest and every file's size and checksum before
// anything is returned, and names the file and what differs.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CHECKPOINT_H
#define STEP_RUNTIME_CHECKPOINT_H

#include "runtime/Tensor.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace step::rt {

/// "stepjit-checkpoint" version 1 (docs/runtime.md).
constexpr int kCheckpointVersion = 1;

struct Checkpoint {
  /// Steps completed when it was written.
  int64_t step = 0;
  /// The writer's own record (kept verbatim): step-run's is the data-loader
  /// position; Session::save's callers may put anything JSON holds.
  nlohmann::json data = nlohmann::json::object();
  /// Whatever else the writer records about itself (artifact identity,
  /// world size); informational, not checked by readCheckpoint.
  nlohmann::json writer = nlohmann::json::object();
  /// By name; a name with '/' is a file in a subfolder.
  std::map<std::string, HostTensor> tensors;
};

/// Writes `ckpt` as the folder `dir`, replacing the checkpoint there
/// atomically (see above). Refuses, writing nothing, when `dir` exists and
/// is neither a checkpoint nor empty: it is someone else's folder.
void writeCheckpoint(const std::string &dir, const Checkpoint &ckpt);

/// Throws writeCheckpoint's refusal, writing nothing, when `dir` could not
/// take a checkpoint (a file, or a folder that is neither a checkpoint nor
/// empty), so that a run can check before its first step.
void checkCheckpointFolder(const std::string &dir);

/// Reads and verifies the checkpoint in `dir`; throws Error naming the file
/// and the defect (no manifest: not a complete checkpoint; wrong format or
/// version; a file missing, of the wrong size or checksum, or not the dtype
/// and shape the manifest says).
Checkpoint readCheckpoint(const std::string &dir);

/// Whether `dir` holds a checkpoint readCheckpoint can try (its manifest, or
/// a complete previous one left by an interrupted fallback replacement).
bool hasCheckpoint(const std::string &dir);

} // namespace step::rt

#endif // STEP_RUNTIME_CHECKPOINT_H
