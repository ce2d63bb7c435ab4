//===- TokenData.cpp - Token files and a background batch prefetcher ------===//

#include "runtime/TokenData.h"

#include "runtime/Npy.h"
#include "runtime/Profile.h"
#include "runtime/cpu/Kernels.h"

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace step::rt {

namespace {
constexpr char kTokenMagic[8] = {'S', 'T', 'E', 'P', 'T', 'O', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kTokenHeaderBytes = 32;

void putLE(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t getLE(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
bool validWidth(int w) { return w == 1 || w == 2 || w == 4; }
} // namespace

void writeTokenFile(const std::string &path,
                    const std::vector<uint32_t> &tokens, int bytesPerToken) {
  if (!validWidth(bytesPerToken))
    throw Error("token file " + path + ": " + std::to_string(bytesPerToken) +
                " bytes per token; expected 1, 2 or 4");
  uint64_t limit = bytesPerToken == 4 ? 0xffffffffull
                                      : (1ull << (8 * bytesPerToken)) - 1;
  std::string bytes(kTokenMagic, sizeof kTokenMagic);
  putLE(bytes, kVersion, 4);
  putLE(bytes, static_cast<uint64_t>(bytesPerToken), 4);
  putLE(bytes, tokens.size(), 8);
  putLE(bytes, 0, 8);
  bytes.reserve(kTokenHeaderBytes + tokens.size() * bytesPerToken);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > limit)
      throw Error("token file " + path + ": token " + std::to_string(i) +
                  " is " + std::to_string(tokens[i]) + ", more than " +
                  std::to_string(bytesPerToken) + " byte(s) hold");
    putLE(bytes, tokens[i], bytesPerToken);
  }
  writeFileAtomic(path, bytes, "token file");
}

TokenFile::TokenFile(const std::string &path) : path_(path) {
  auto fail = [&](const std::string &why) {
    throw Error("token file " + path + ": " + why);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(std::string("cannot open it (") + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat it");
  }
  mapBytes_ = static_cast<size_t>(st.st_size);
  if (mapBytes_ < kTokenHeaderBytes) {
    ::close(fd);
    fail(std::to_string(mapBytes_) + " bytes, shorter than the " +
         std::to_string(kTokenHeaderBytes) + "-byte header");
  }
  map_ = ::mmap(nullptr, mapBytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd); // the mapping keeps the file
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(std::string("mmap failed (") + std::strerror(errno) + ")");
  }
  const auto *p = static_cast<const uint8_t *>(map_);
  try {
    if (std::memcmp(p, kTokenMagic, sizeof kTokenMagic) != 0)
      fail("not a token file (expected the magic STEPTOK1)");
    uint64_t version = getLE(p + 8, 4);
    if (version != kVersion)
      fail("format version " + std::to_string(version) + "; this reader "
           "reads version " + std::to_string(kVersion));
    width_ = static_cast<int>(getLE(p + 12, 4));
    if (!validWidth(width_))
      fail(std::to_string(width_) + " bytes per token; expected 1, 2 or 4");
    uint64_t count = getLE(p + 16, 8);
    if (count > (mapBytes_ - kTokenHeaderBytes) / width_ ||
        kTokenHeaderBytes + count * width_ != mapBytes_)
      fail("the header says " + std::to_string(count) + " tokens of " +
           std::to_string(width_) + " byte(s), but the file has " +
           std::to_string(mapBytes_ - kTokenHeaderBytes) +
           " bytes after the header (truncated?)");
    count_ = static_cast<int64_t>(count);
  } catch (...) {
    ::munmap(map_, mapBytes_);
    map_ = nullptr;
    throw;
  }
  tokens_ = p + kTokenHeaderBytes;
  // Batches read windows at random offsets.
  ::madvise(map_, mapBytes_, MADV_RANDOM);
}

TokenFile::~TokenFile() {
  if (map_)
    ::munmap(map_, mapBytes_);
}

uint32_t TokenFile::at(int64_t i) const {
  return static_cast<uint32_t>(
      getLE(tokens_ + static_cast<size_t>(i) * width_, width_));
}

std::map<std::string, HostTensor> tokenBatch(const TokenFile &file,
                                             const BatchSpec &spec,
                                             int64_t index) {
  const int64_t B = spec.batch, T = spec.context;
  if (B < 1 || T < 1)
    throw Error("token batches: batch " + std::to_string(B) + " x context " +
                std::to_string(T) + "; both must be at least 1");
  if (file.size() < T + 1)
    throw Error("token file " + file.path() + " holds " +
                std::to_string(file.size()) + " tokens; a row of context " +
                std::to_string(T) + " needs " + std::to_string(T + 1));
  if (spec.dtype != DType::I64 && spec.dtype != DType::I32)
    throw Error("token batches: tokens must be i64 or i32, not " +
                std::string(dtypeName(spec.dtype)));
  // Row starts lie in [0, n - T - 1]: the window's last target exists.
  auto starts = static_cast<uint64_t>(file.size() - T);
  HostTensor tokens(spec.dtype, {B, T}), targets(spec.dtype, {B, T});
  for (int64_t r = 0; r < B; ++r) {
    uint64_t start;
    if (spec.sequential)
      start = static_cast<uint64_t>((index * B + r) * T) % starts;
    else
      start = cpu::splitmix64(spec.seed ^
                              cpu::splitmix64(static_cast<uint64_t>(index) *
                                                  static_cast<uint64_t>(B) +
                                              static_cast<uint64_t>(r))) %
              starts;
    for (int64_t t = 0; t < T; ++t) {
      auto i = static_cast<int64_t>(start) + t;
      int64_t at = r * T + t;
      if (spec.dtype == DType::I64) {
        tokens.data<int64_t>()[at] = file.at(i);
        targets.data<int64_t>()[at] = file.at(i + 1);
      } else {
        tokens.data<int32_t>()[at] = static_cast<int32_t>(file.at(i));
        targets.data<int32_t>()[at] = static_cast<int32_t>(file.at(i + 1));
      }
    }
  }
  std::map<std::string, HostTensor> out;
  out["tokens"] = std::move(tokens);
  out["targets"] = std::move(targets);
  return out;
}

//===----------------------------------------------------------------------===//
// Prefetcher
//===----------------------------------------------------------------------===//

Prefetcher::Prefetcher(std::shared_ptr<const TokenFile> file, BatchSpec spec,
                       int64_t first, int depth)
    : file_(std::move(file)), spec_(spec), depth_(depth), next_(first),
      made_(first) {
  if (!file_)
    throw Error("Prefetcher: no token file");
  if (depth_ < 0)
    throw Error("Prefetcher: depth " + std::to_string(depth_) +
                "; expected 0 or more");
  // A bad spec fails here, on the caller's thread, not in the first next().
  tokenBatch(*file_, BatchSpec{1, spec_.context, 0, true, spec_.dtype}, 0);
  if (depth_ > 0)
    thread_ = std::thread([this] { loop(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void Prefetcher::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || static_cast<int>(ready_.size()) < depth_;
    });
    if (stop_)
      return;
    int64_t k = made_;
    lock.unlock();
    std::map<std::string, HostTensor> batch;
    std::exception_ptr error;
    try {
      batch = tokenBatch(*file_, spec_, k);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      error_ = error;
      cv_.notify_all();
      return;
    }
    ready_.push_back(std::move(batch));
    ++made_;
    cv_.notify_all();
  }
}

std::map<std::string, HostTensor> Prefetcher::next() {
  double start = steadySeconds();
  std::map<std::string, HostTensor> batch;
  if (depth_ == 0) {
    batch = tokenBatch(*file_, spec_, next_);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !ready_.empty() || error_; });
    if (ready_.empty())
      std::rethrow_exception(error_);
    batch = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
  }
  ++next_;
  lastWait_ = steadySeconds() - start;
  totalWait_ += lastWait_;
  return batch;
}

} // namespace step::rt
