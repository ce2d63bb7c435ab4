//===- Comm.cpp - Communicators: self, thread groups, the current one ----===//

#include "runtime/Comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace step::rt {

Communicator::~Communicator() = default;

void Communicator::abortAll(int code) { std::_Exit(code); }

void Communicator::barrier() {
  int32_t token = 0;
  allReduce(&token, &token, 1, DType::I32, CommOp::Sum);
}

Communicator &Communicator::subgroup(const std::string &partition, int color,
                                     int position) {
  auto it = groups_.find(partition);
  if (it == groups_.end())
    it = groups_.emplace(partition, split(color, position)).first;
  return *it->second;
}

namespace {

/// dst[i] = op(dst[i], src[i]).
template <typename T>
void combine(T *dst, const T *src, int64_t n, CommOp op) {
  for (int64_t i = 0; i < n; ++i) {
    switch (op) {
    case CommOp::Sum:
      dst[i] = static_cast<T>(dst[i] + src[i]);
      break;
    case CommOp::Max:
      dst[i] = std::max(dst[i], src[i]);
      break;
    case CommOp::Min:
      dst[i] = std::min(dst[i], src[i]);
      break;
    }
  }
}

} // namespace

void checkReducible(DType dtype, CommOp op) {
  combineInto(nullptr, nullptr, 0, dtype, op); // combining nothing checks
}

void combineInto(void *dst, const void *src, int64_t n, DType dtype,
                 CommOp op) {
  switch (dtype) {
  case DType::F32:
    return combine(static_cast<float *>(dst), static_cast<const float *>(src),
                   n, op);
  case DType::I32:
    return combine(static_cast<int32_t *>(dst),
                   static_cast<const int32_t *>(src), n, op);
  case DType::I64:
    return combine(static_cast<int64_t *>(dst),
                   static_cast<const int64_t *>(src), n, op);
  case DType::I1:
    if (op == CommOp::Sum)
      throw Error("all_reduce: i1 values reduce by max or min, not sum");
    return combine(static_cast<uint8_t *>(dst),
                   static_cast<const uint8_t *>(src), n, op);
  default:
    throw Error(std::string("communicator: no reduction for ") +
                dtypeName(dtype) + " (f16/bf16 are reduced in f32)");
  }
}

namespace {

class SelfCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string kind() const override { return "self"; }
  void allReduce(const void *in, void *out, int64_t count, DType dtype,
                 CommOp) override {
    if (in != out)
      std::memmove(out, in, static_cast<size_t>(count) * dtypeSize(dtype));
  }
  void allGather(const void *in, void *out, int64_t bytes) override {
    if (in != out)
      std::memmove(out, in, static_cast<size_t>(bytes));
  }
  void broadcast(void *, int64_t, int) override {}

protected:
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SelfCommunicator>();
  }
};

/// What the threads of one group share: a reusable barrier and one slot
/// per rank where each posts its buffer.
struct ThreadShared {
  explicit ThreadShared(int size)
      : size(size), slots(static_cast<size_t>(size)),
        colors(static_cast<size_t>(size)) {}
  const int size;
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<const void *> slots;
  /// split(): each rank's (color, position), and the groups made.
  std::vector<std::pair<int, int>> colors;
  std::map<int, std::shared_ptr<ThreadShared>> made;

  void barrier() {
    std::unique_lock<std::mutex> lock(mutex);
    uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen; });
  }
};

class ThreadCommunicator final : public Communicator {
public:
  ThreadCommunicator(std::shared_ptr<ThreadShared> shared, int rank)
      : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }
  std::string kind() const override { return "threads"; }

  // Post, wait for all, compute from every slot into a private buffer,
  // wait again (nobody's buffer is needed any more), then write. A refused
  // reduction (i1 by sum) throws before posting: a rank that threw after it
  // would free its buffer while the others still read it.
  void allReduce(const void *in, void *out, int64_t count, DType dtype,
                 CommOp op) override {
    checkReducible(dtype, op);
    size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
    shared_->slots[static_cast<size_t>(rank_)] = in;
    shared_->barrier();
    std::vector<uint8_t> acc(static_cast<const uint8_t *>(shared_->slots[0]),
                             static_cast<const uint8_t *>(shared_->slots[0]) +
                                 bytes);
    for (int r = 1; r < size(); ++r)
      combineInto(acc.data(), shared_->slots[static_cast<size_t>(r)], count,
                  dtype, op);
    shared_->barrier();
    if (bytes)
      std::memcpy(out, acc.data(), bytes);
  }
  void allGather(const void *in, void *out, int64_t bytes) override {
    auto n = static_cast<size_t>(bytes);
    shared_->slots[static_cast<size_t>(rank_)] = in;
    shared_->barrier();
    std::vector<uint8_t> all(n * static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r)
      if (n)
        std::memcpy(all.data() + n * static_cast<size_t>(r),
                    shared_->slots[static_cast<size_t>(r)], n);
    shared_->barrier();
    if (!all.empty())
      std::memcpy(out, all.data(), all.size());
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    auto n = static_cast<size_t>(bytes);
    shared_->slots[static_cast<size_t>(rank_)] = data;
    shared_->barrier();
    std::vector<uint8_t> copy(
        static_cast<const uint8_t *>(shared_->slots[static_cast<size_t>(root)]),
        static_cast<const uint8_t *>(shared_->slots[static_cast<size_t>(root)]) +
            n);
    shared_->barrier();
    if (rank_ != root && n)
      std::memcpy(data, copy.data(), n);
  }

protected:
  std::unique_ptr<Communicator> split(int color, int position) override {
    ThreadShared &s = *shared_;
    s.colors[static_cast<size_t>(rank_)] = {color, position};
    s.barrier();
    std::shared_ptr<ThreadShared> group;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      auto it = s.made.find(color);
      if (it == s.made.end()) {
        int members = 0;
        for (auto [c, p] : s.colors)
          members += c == color;
        it = s.made.emplace(color, std::make_shared<ThreadShared>(members))
                 .first;
      }
      group = it->second;
    }
    s.barrier();
    if (rank_ == 0) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.made.clear(); // every rank holds its group now
    }
    s.barrier();
    return std::make_unique<ThreadCommunicator>(group, position);
  }

private:
  std::shared_ptr<ThreadShared> shared_;
  int rank_;
};

thread_local Communicator *current = nullptr;

} // namespace

Communicator &selfCommunicator() {
  static SelfCommunicator self;
  return self;
}

std::vector<std::unique_ptr<Communicator>> makeThreadGroup(int size) {
  if (size < 1)
    throw Error("a thread group needs at least one rank, asked for " +
                std::to_string(size));
  auto shared = std::make_shared<ThreadShared>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r)
    ranks.push_back(std::make_unique<ThreadCommunicator>(shared, r));
  return ranks;
}

namespace {

/// lockstepSubgroup's communicator.
class LockstepGroup final : public Communicator {
public:
  LockstepGroup(Communicator &parent, std::vector<int> members, int position)
      : parent_(parent), members_(std::move(members)), position_(position) {}
  int rank() const override { return position_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string kind() const override { return parent_.kind() + " group"; }
  bool anyThread() const override { return parent_.anyThread(); }

  void allReduce(const void *in, void *out, int64_t count, DType dtype,
                 CommOp op) override {
    checkReducible(dtype, op);
    auto n = static_cast<size_t>(count) * dtypeSize(dtype);
    std::vector<uint8_t> all = gatherAll(in, n);
    uint8_t *acc = all.data() + offsetOf(0, n); // position 0's, reduced into
    for (int p = 1; p < size(); ++p)
      combineInto(acc, all.data() + offsetOf(p, n), count, dtype, op);
    if (n)
      std::memcpy(out, acc, n);
  }
  void allGather(const void *in, void *out, int64_t bytes) override {
    auto n = static_cast<size_t>(bytes);
    std::vector<uint8_t> all = gatherAll(in, n);
    for (int p = 0; p < size() && n; ++p)
      std::memcpy(static_cast<uint8_t *>(out) + n * static_cast<size_t>(p),
                  all.data() + offsetOf(p, n), n);
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    if (root < 0 || root >= size())
      throw Error("broadcast from rank " + std::to_string(root) +
                  ", which is not a rank of a group of " +
                  std::to_string(size()));
    auto n = static_cast<size_t>(bytes);
    std::vector<uint8_t> all = gatherAll(data, n);
    if (position_ != root && n)
      std::memcpy(data, all.data() + offsetOf(root, n), n);
  }
  [[noreturn]] void abortAll(int code) override {
    parent_.abortAll(code);
    std::_Exit(code); // a virtual call's noreturn is not visible here
  }

protected:
  std::unique_ptr<Communicator> split(int color, int position) override {
    return lockstepSubgroup(*this, color, position);
  }

private:
  /// Every parent rank's `n` bytes, in parent rank order.
  std::vector<uint8_t> gatherAll(const void *in, size_t n) {
    std::vector<uint8_t> all(n * static_cast<size_t>(parent_.size()));
    parent_.allGather(in, all.data(), static_cast<int64_t>(n));
    return all;
  }
  /// Where member `p`'s bytes are in gatherAll's result.
  size_t offsetOf(int p, size_t n) const {
    return n * static_cast<size_t>(members_[static_cast<size_t>(p)]);
  }

  Communicator &parent_;
  std::vector<int> members_; ///< parent ranks, by position in the group
  int position_;
};

} // namespace

std::unique_ptr<Communicator> lockstepSubgroup(Communicator &parent, int color,
                                               int position) {
  int32_t mine[2] = {color, position};
  std::vector<int32_t> all(2 * static_cast<size_t>(parent.size()));
  parent.allGather(mine, all.data(), sizeof mine);
  std::vector<int> members;
  for (int r = 0; r < parent.size(); ++r)
    if (all[2 * static_cast<size_t>(r)] == color)
      members.push_back(r);
  // Positions 0..size-1 within the group, each once.
  std::vector<int> byPosition(members.size(), -1);
  for (int r : members) {
    int32_t p = all[2 * static_cast<size_t>(r) + 1];
    if (p < 0 || p >= static_cast<int32_t>(members.size()) ||
        byPosition[static_cast<size_t>(p)] != -1)
      throw Error("subgroup " + std::to_string(color) + " of the " +
                  parent.kind() + " communicator: rank " + std::to_string(r) +
                  " asks for position " + std::to_string(p) +
                  ", which is out of range or taken");
    byPosition[static_cast<size_t>(p)] = r;
  }
  return std::make_unique<LockstepGroup>(parent, std::move(byPosition),
                                         position);
}

bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

Communicator &worldCommunicator() {
  if (launchedByMpi())
    return mpiCommunicator();
  return launchedByEnv() ? envCommunicator() : selfCommunicator();
}

#ifndef STEP_HAVE_MPI
bool haveMpi() { return false; }
Communicator &mpiCommunicator() {
  throw Error("this build of StepJIT has no MPI (install libopenmpi-dev and "
              "reconfigure): it cannot join the ranks mpirun started");
}
#endif

Communicator &currentCommunicator() {
  return current ? *current : selfCommunicator();
}

CommScope::CommScope(Communicator &comm) : previous_(current) {
  current = &comm;
}
CommScope::~CommScope() { current = previous_; }

std::string partitionName(const ReplicaGroups &groups) {
  std::string key = std::to_string(groups.groupSize) + ":";
  for (int64_t r : groups.ranks)
    key += std::to_string(r) + ",";
  return key;
}

bool isWholeWorld(const ReplicaGroups &groups) {
  auto n = static_cast<int64_t>(groups.ranks.size());
  if (groups.groupSize != n)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (groups.ranks[static_cast<size_t>(i)] != i)
      return false;
  return true;
}

Communicator &groupOf(Communicator &comm, const ReplicaGroups &groups,
                      const std::string &op) {
  auto n = static_cast<int64_t>(groups.ranks.size());
  if (groups.groupSize < 1 || n % groups.groupSize != 0)
    throw Error(op + ": group_size " + std::to_string(groups.groupSize) +
                " does not divide the " + std::to_string(n) +
                " replicas of replica_groups");
  if (n != comm.size())
    throw Error(op + ": compiled for " + std::to_string(n) +
                " replicas, but this run has " + std::to_string(comm.size()) +
                " (" + comm.kind() + "); launch it with " + std::to_string(n) +
                " ranks (mpirun -np " + std::to_string(n) + ")");
  auto pos = std::find(groups.ranks.begin(), groups.ranks.end(), comm.rank());
  if (pos == groups.ranks.end())
    throw Error(op + ": rank " + std::to_string(comm.rank()) +
                " is in no replica group");
  if (isWholeWorld(groups))
    return comm;
  auto index = static_cast<int>(pos - groups.ranks.begin());
  auto g = static_cast<int>(groups.groupSize);
  return comm.subgroup(partitionName(groups), index / g, index % g);
}

HostTensor shardOf(const HostTensor &full, int64_t index, int64_t count) {
  if (count < 1 || index < 0 || index >= count)
    throw Error("shard " + std::to_string(index) + " of " +
                std::to_string(count) + " does not exist");
  int64_t n = full.numel();
  int64_t s = (n + count - 1) / count;
  HostTensor out(full.dtype(), {s});
  int64_t begin = std::min(n, index * s), end = std::min(n, begin + s);
  size_t e = dtypeSize(full.dtype());
  if (end > begin)
    std::memcpy(out.raw(),
                static_cast<const uint8_t *>(full.raw()) +
                    static_cast<size_t>(begin) * e,
                static_cast<size_t>(end - begin) * e);
  return out;
}

HostTensor unshard(const std::vector<HostTensor> &blocks, const Shape &shape) {
  if (blocks.empty())
    throw Error("unshard: no blocks");
  int64_t n = numElements(shape);
  auto count = static_cast<int64_t>(blocks.size());
  int64_t s = (n + count - 1) / count;
  HostTensor out(blocks[0].dtype(), shape);
  size_t e = dtypeSize(out.dtype());
  for (int64_t i = 0; i < count; ++i) {
    const HostTensor &b = blocks[static_cast<size_t>(i)];
    if (b.dtype() != out.dtype() || b.shape() != Shape{s})
      throw Error("unshard: block " + std::to_string(i) + " is " +
                  typeStr(b.dtype(), b.shape()) + ", expected " +
                  typeStr(out.dtype(), Shape{s}) + " for " +
                  shapeToString(shape) + " in " + std::to_string(count) +
                  " blocks");
    int64_t begin = std::min(n, i * s), end = std::min(n, begin + s);
    if (end > begin)
      std::memcpy(static_cast<uint8_t *>(out.raw()) +
                      static_cast<size_t>(begin) * e,
                  b.raw(), static_cast<size_t>(end - begin) * e);
  }
  return out;
}

namespace {

/// Where the parts of a tensor-parallel split lie: the tensor seen as
/// [outer, size, inner] around dim `dim`, and the elements of dim `dim`
/// each rank takes from each group (`piece`).
struct TpLayout {
  int64_t outer = 1, size = 0, inner = 1, piece = 0;
};

/// The layout of `full` split `groups` x `count` ways along `dim`; throws
/// Error naming `what` when it does not split so.
TpLayout tpLayout(const std::string &what, const Shape &full, int64_t dim,
                  int64_t groups, int64_t count) {
  auto rank = static_cast<int64_t>(full.size());
  if (dim < 0 || dim >= rank)
    throw Error(what + ": dim " + std::to_string(dim) +
                " is out of range for a tensor of rank " +
                std::to_string(rank) + " (shape " + shapeToString(full) +
                "), expected " +
                (rank ? "0.." + std::to_string(rank - 1)
                      : std::string("a tensor of rank >= 1")));
  if (groups < 1)
    throw Error(what + ": groups is " + std::to_string(groups) +
                ", expected at least 1");
  if (count < 1)
    throw Error(what + ": " + std::to_string(count) +
                " ranks, expected at least 1");
  TpLayout l;
  l.size = full[static_cast<size_t>(dim)];
  // Two divisions, not size % (groups * count), which can overflow.
  if (l.size % groups != 0 || (l.size / groups) % count != 0)
    throw Error(what + ": dim " + std::to_string(dim) + " of " +
                shapeToString(full) + " has size " + std::to_string(l.size) +
                ", which does not split into " + std::to_string(groups) +
                " group(s) x " + std::to_string(count) +
                " rank(s) (expected a multiple of " +
                std::to_string(groups) + " x " + std::to_string(count) + ")");
  for (int64_t d = 0; d < dim; ++d)
    l.outer *= full[static_cast<size_t>(d)];
  for (int64_t d = dim + 1; d < rank; ++d)
    l.inner *= full[static_cast<size_t>(d)];
  l.piece = l.size / groups / count;
  return l;
}

} // namespace

HostTensor tpSliceOf(const HostTensor &full, int64_t dim, int64_t groups,
                     int64_t index, int64_t count) {
  TpLayout l = tpLayout("tpSliceOf", full.shape(), dim, groups, count);
  if (index < 0 || index >= count)
    throw Error("tpSliceOf: rank " + std::to_string(index) +
                " is not one of the " + std::to_string(count) +
                " tensor-parallel ranks (expected 0.." +
                std::to_string(count - 1) + ")");
  Shape shape = full.shape();
  shape[static_cast<size_t>(dim)] /= count;
  HostTensor out(full.dtype(), shape);
  auto e = static_cast<int64_t>(dtypeSize(full.dtype()));
  int64_t localSize = l.size / count, groupSize = l.size / groups;
  auto bytes = static_cast<size_t>(l.piece * l.inner * e);
  const auto *src = static_cast<const uint8_t *>(full.raw());
  auto *dst = static_cast<uint8_t *>(out.raw());
  if (bytes == 0)
    return out;
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t from = o * l.size + g * groupSize + index * l.piece;
      int64_t to = o * localSize + g * l.piece;
      std::memcpy(dst + static_cast<size_t>(to * l.inner * e),
                  src + static_cast<size_t>(from * l.inner * e), bytes);
    }
  return out;
}

HostTensor tpUnslice(const std::vector<HostTensor> &blocks, int64_t dim,
                     int64_t groups) {
  if (blocks.empty())
    throw Error("tpUnslice: no blocks");
  const HostTensor &first = blocks[0];
  for (size_t t = 1; t < blocks.size(); ++t)
    if (blocks[t].dtype() != first.dtype() ||
        blocks[t].shape() != first.shape())
      throw Error("tpUnslice: block " + std::to_string(t) + " is " +
                  dtypeName(blocks[t].dtype()) + " " +
                  shapeToString(blocks[t].shape()) + ", expected " +
                  dtypeName(first.dtype()) + " " +
                  shapeToString(first.shape()) + " as block 0");
  auto count = static_cast<int64_t>(blocks.size());
  auto rank = static_cast<int64_t>(first.shape().size());
  if (dim < 0 || dim >= rank)
    throw Error("tpUnslice: dim " + std::to_string(dim) +
                " is out of range for blocks of rank " + std::to_string(rank) +
                " (shape " + shapeToString(first.shape()) + "), expected " +
                (rank ? "0.." + std::to_string(rank - 1)
                      : std::string("blocks of rank >= 1")));
  if (groups < 1)
    throw Error("tpUnslice: groups is " + std::to_string(groups) +
                ", expected at least 1");
  int64_t local = first.shape()[static_cast<size_t>(dim)];
  if (local % groups != 0)
    throw Error("tpUnslice: dim " + std::to_string(dim) + " of the blocks (" +
                shapeToString(first.shape()) + ") has size " +
                std::to_string(local) + ", not a multiple of its " +
                std::to_string(groups) + " groups");
  Shape shape = first.shape();
  shape[static_cast<size_t>(dim)] *= count;
  TpLayout l = tpLayout("tpUnslice", shape, dim, groups, count);
  HostTensor out(first.dtype(), shape);
  auto e = static_cast<int64_t>(dtypeSize(first.dtype()));
  int64_t localSize = l.size / count, groupSize = l.size / groups;
  auto bytes = static_cast<size_t>(l.piece * l.inner * e);
  auto *dst = static_cast<uint8_t *>(out.raw());
  if (bytes == 0)
    return out;
  for (int64_t t = 0; t < count; ++t) {
    const auto *src =
        static_cast<const uint8_t *>(blocks[static_cast<size_t>(t)].raw());
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t g = 0; g < groups; ++g) {
        int64_t from = o * localSize + g * l.piece;
        int64_t to = o * l.size + g * groupSize + t * l.piece;
        std::memcpy(dst + static_cast<size_t>(to * l.inner * e),
                    src + static_cast<size_t>(from * l.inner * e), bytes);
      }
  }
  return out;
}

} // namespace step::rt
