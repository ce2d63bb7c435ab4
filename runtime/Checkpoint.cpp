//===- Checkpoint.cpp - Training checkpoints that survive a crash --------===//
//
// The write protocol and its guarantees are in Checkpoint.h. Costs: every
// tensor is serialized once, checksummed once (FNV-1a 64) and written
// durably (the file and its folder fsync'ed: two fsyncs per file, plus one
// per folder at the end); reading reads each file once for the checksum and
// once to parse it.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"

#include "runtime/Artifact.h"
#include "runtime/Npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

namespace step::rt {
namespace fs = std::filesystem;

namespace {
constexpr const char *kManifest = "manifest.json";
constexpr const char *kFormat = "stepjit-checkpoint";
/// The first file of every folder a write makes next to DIR (DIR.tmp.<pid>,
/// DIR.old.<pid>): only folders that hold it are ever taken for leftovers,
/// so a user's own `ckpt.old.1` is neither read nor removed.
constexpr const char *kMarker = ".stepjit-checkpoint-write";

/// `dir` without a trailing separator, so that siblings can be named.
fs::path folderPath(const std::string &dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty())
    p = p.parent_path();
  if (p.empty() || p == "." || p == "..")
    throw Error("checkpoint: '" + dir +
                "' cannot be replaced as a folder; name a subfolder");
  return p;
}

fs::path parentOf(const fs::path &p) {
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Whether `name` is `base` + `tag` + digits (a leftover of a write).
bool isLeftover(const std::string &name, const std::string &base,
                const std::string &tag) {
  std::string prefix = base + tag;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix))
    return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  return true;
}

/// Leftovers of interrupted writes of `target` tagged `tag`.
std::vector<fs::path> leftovers(const fs::path &target,
                                const std::string &tag) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::path parent = parentOf(target);
  if (!fs::is_directory(parent, ec))
    return out;
  fs::directory_iterator it(parent, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (isLeftover(it->path().filename().string(), target.filename().string(),
                   tag) &&
        fs::is_regular_file(it->path() / kMarker, ec))
      out.push_back(it->path());
  return out;
}

/// Whether `dir` holds a manifest of this format (its other fields are
/// checked by readCheckpoint). A folder with some other manifest.json is
/// no checkpoint, and is never replaced.
bool hasManifest(const fs::path &dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kManifest, ec))
    return false;
  std::ifstream in(dir / kManifest, std::ios::binary);
  nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return m.is_object() && m.contains("format") && m["format"] == kFormat;
}

/// A manifest field that must be a JSON integer in [lo, INT64_MAX]: a
/// number past the range parses as a double, and converting it would be
/// undefined.
int64_t integerField(const nlohmann::json &j, const std::string &field,
                     int64_t lo) {
  if (!j.is_number_integer() ||
      (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX) ||
      j.get<int64_t>() < lo)
    throw Error("\"" + field + "\" is " + j.dump() +
                ", expected an integer >= " + std::to_string(lo));
  return j.get<int64_t>();
}

/// The folder holding the checkpoint of `target`: itself, or the previous
/// checkpoint a fallback replacement had moved aside when it was cut off.
fs::path checkpointFolder(const fs::path &target) {
  if (hasManifest(target))
    return target;
  std::error_code ec;
  if (!fs::exists(target, ec))
    for (const fs::path &old : leftovers(target, ".old."))
      if (hasManifest(old))
        return old;
  return target;
}

std::string readFile(const fs::path &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(what + ": cannot open " + path.string() + ": " +
                std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A manifest's file name for a tensor must stay inside the folder.
fs::path fileIn(const fs::path &dir, const std::string &file,
                const std::string &what) {
  fs::path rel = fs::path(file).lexically_normal();
  if (file.empty() || rel.is_absolute() || *rel.begin() == "..")
    throw Error(what + ": file '" + file + "' is outside the checkpoint");
  return dir / rel;
}

void replaceFolder(const fs::path &tmp, const fs::path &target) {
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    if (std::rename(tmp.c_str(), target.c_str()) != 0)
      throw Error("checkpoint: cannot rename " + tmp.string() + " to " +
                  target.string() + ": " + std::strerror(errno));
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(),
                  RENAME_EXCHANGE) == 0)
    return; // tmp now holds the old checkpoint
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    throw Error("checkpoint: cannot swap " + tmp.string() + " with " +
                target.string() + ": " + std::strerror(errno));
  // No RENAME_EXCHANGE here: move the old one aside (a reader finds it
  // there until the new one is in place), then the new one in.
  fs::path old = target.string() + ".old." + std::to_string(::getpid());
  if (fs::exists(old / kMarker, ec))
    fs::remove_all(old, ec);
  // Marked first, so that a reader or the next write knows it for ours.
  writeFileAtomic((target / kMarker).string(), "", "checkpoint");
  if (std::rename(target.c_str(), old.c_str()) != 0)
    throw Error("checkpoint: cannot move " + target.string() + " aside: " +
                std::strerror(errno));
  if (std::rename(tmp.c_str(), target.c_str()) != 0)
    throw Error("checkpoint: cannot rename " + tmp.string() + " to " +
                target.string() + ": " + std::strerror(errno));
  fs::rename(old, tmp, ec); // removed with tmp below
}
} // namespace

bool hasCheckpoint(const std::string &dir) {
  return hasManifest(checkpointFolder(folderPath(dir)));
}

void checkCheckpointFolder(const std::string &dir) {
  fs::path target = folderPath(dir);
  std::error_code ec;
  if (!fs::exists(target, ec))
    return;
  if (!fs::is_directory(target, ec))
    throw Error("checkpoint: '" + dir + "' exists and is not a folder");
  if (!hasManifest(target) && !fs::is_empty(target, ec))
    throw Error("checkpoint: '" + dir + "' is a folder that holds no "
                "checkpoint (no " + kManifest + ") and is not empty; "
                "refusing to replace it");
}

void writeCheckpoint(const std::string &dir, const Checkpoint &ckpt) {
  checkCheckpointFolder(dir);
  fs::path target = folderPath(dir);
  std::error_code ec;
  fs::create_directories(parentOf(target), ec);
  // Partial new ones of interrupted writes go now; an old one moved aside
  // stays until the new one is in place (it may be the only checkpoint).
  for (const fs::path &p : leftovers(target, ".tmp."))
    fs::remove_all(p, ec);

  fs::path tmp = target.string() + ".tmp." + std::to_string(::getpid());
  if (fs::exists(tmp, ec))
    throw Error("checkpoint: " + tmp.string() + " exists and is not a "
                "leftover of a checkpoint write; refusing to replace it");
  try {
    fs::create_directories(tmp);
    writeFileAtomic((tmp / kMarker).string(), "", "checkpoint");
    std::set<fs::path> folders;
    nlohmann::json files = nlohmann::json::object();
    for (const auto &[name, t] : ckpt.tensors) {
      std::string file = name + ".npy";
      fs::path path = fileIn(tmp, file, "checkpoint: tensor '" + name + "'");
      for (fs::path p = path.parent_path(); p != tmp; p = p.parent_path()) {
        fs::create_directories(p);
        folders.insert(p);
      }
      std::string bytes = npyBytes(t, path.string());
      writeFileAtomic(path.string(), bytes, "checkpoint", /*durable=*/true);
      files[name] = {{"file", file},
                     {"dtype", dtypeName(t.dtype())},
                     {"shape", t.shape()},
                     {"bytes", bytes.size()},
                     {"fnv1a64", hex64(fnv1a64(bytes.data(), bytes.size()))}};
    }
    for (const fs::path &f : folders)
      syncFolder(f.string(), "checkpoint");
    nlohmann::json manifest = {{"format", kFormat},
                               {"version", kCheckpointVersion},
                               {"step", ckpt.step},
                               {"data", ckpt.data},
                               {"writer", ckpt.writer},
                               {"tensors", files}};
    // Last: from here on the folder is a checkpoint.
    writeFileAtomic((tmp / kManifest).string(), manifest.dump(2) + "\n",
                    "checkpoint", /*durable=*/true);
    replaceFolder(tmp, target);
    syncFolder(parentOf(target).string(), "checkpoint");
  } catch (const std::exception &e) {
    fs::remove_all(tmp, ec);
    throw Error(std::string("checkpoint: writing ") + dir + ": " + e.what());
  }
  fs::remove_all(tmp, ec);
  for (const fs::path &p : leftovers(target, ".old."))
    fs::remove_all(p, ec);
}

Checkpoint readCheckpoint(const std::string &dir) {
  fs::path folder = checkpointFolder(folderPath(dir));
  std::string what = "checkpoint " + folder.string();
  std::error_code ec;
  if (!fs::is_regular_file(folder / kManifest, ec))
    throw Error(what + ": no " + kManifest +
                ": not a complete checkpoint (never written, or its write "
                "was cut off before the manifest)");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(readFile(folder / kManifest, what));
  } catch (const nlohmann::json::exception &e) {
    throw Error(what + ": " + kManifest + " is not JSON: " + e.what());
  }
  Checkpoint c;
  try {
    if (m.value("format", std::string()) != kFormat)
      throw Error("format is not \"" + std::string(kFormat) + "\"");
    int64_t version = integerField(m.at("version"), "version", 0);
    if (version != kCheckpointVersion)
      throw Error("version " + std::to_string(version) + "; this StepJIT "
                  "reads version " + std::to_string(kCheckpointVersion));
    c.step = integerField(m.at("step"), "step", 0);
    c.data = m.value("data", nlohmann::json::object());
    c.writer = m.value("writer", nlohmann::json::object());
    if (!m.at("tensors").is_object())
      throw Error("\"tensors\" is not an object");
  } catch (const nlohmann::json::exception &e) {
    throw Error(what + ": " + kManifest + ": " + e.what());
  } catch (const Error &e) {
    throw Error(what + ": " + kManifest + ": " + e.what());
  }
  for (const auto &[name, entry] : m["tensors"].items()) {
    std::string file, sum, dtype;
    Shape shape;
    size_t size = 0;
    try {
      file = entry.at("file").get<std::string>();
      sum = entry.at("fnv1a64").get<std::string>();
      dtype = entry.at("dtype").get<std::string>();
      if (!entry.at("shape").is_array())
        throw Error("\"shape\" is not an array");
      for (const nlohmann::json &d : entry["shape"])
        shape.push_back(integerField(d, "shape", 0));
      size = static_cast<size_t>(integerField(entry.at("bytes"), "bytes", 0));
    } catch (const nlohmann::json::exception &e) {
      throw Error(what + ": " + kManifest + ": tensor '" + name +
                  "': " + e.what());
    } catch (const Error &e) {
      throw Error(what + ": " + kManifest + ": tensor '" + name +
                  "': " + e.what());
    }
    fs::path path = fileIn(folder, file, what + ": tensor '" + name + "'");
    std::string bytes = readFile(path, what);
    if (bytes.size() != size)
      throw Error(what + ": " + path.string() + " has " +
                  std::to_string(bytes.size()) + " bytes, the manifest says " +
                  std::to_string(size));
    std::string found = hex64(fnv1a64(bytes.data(), bytes.size()));
    if (found != sum)
      throw Error(what + ": " + path.string() + ": checksum " + found +
                  " differs from the manifest's " + sum +
                  " (the file was changed or damaged)");
    HostTensor t = readNpy(path.string());
    if (dtypeName(t.dtype()) != dtype || t.shape() != shape)
      throw Error(what + ": " + path.string() + " is " + dtypeName(t.dtype()) +
                  " " + shapeToString(t.shape()) + ", the manifest says " +
                  dtype + " " + shapeToString(shape));
    c.tensors[name] = std::move(t);
  }
  return c;
}

} // namespace step::rt
