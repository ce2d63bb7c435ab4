//===- Comm.h - Communicators: the replicas of a distributed step -*- C++ -*-===//
//
// A Communicator is one rank's handle on a group of processes or threads
// that run the same step (SPMD, docs/distributed.md). The CPU kernels of
// the collective ops (runtime/cpu/Collectives.cpp) run on the communicator
// installed for the calling thread (CommScope); with none installed it is
// a group of one, where every collective is the identity.
//
// Implementations:
//  - selfCommunicator(): one rank.
//  - ThreadGroup: N ranks as N threads of one process (tests, and the
//    interpreter's differential tests of step-shard).
//  - mpiCommunicator() (runtime/Mpi.cpp, only when built with MPI): the
//    processes `mpirun` started; MPI_COMM_WORLD.
//  - connectTcp() / envCommunicator() (runtime/Tcp.cpp): processes started
//    with their rank, the world size and a rendezvous address in the
//    environment (STEP_RANK, STEP_WORLD_SIZE, STEP_MASTER_ADDR,
//    STEP_MASTER_PORT, or torchrun's RANK, WORLD_SIZE, MASTER_ADDR,
//    MASTER_PORT), joined over TCP; no MPI needed.
//
// Every collective is called by all ranks of the communicator in the same
// order; each rank's result has the same bits (reductions are computed once,
// in rank order or by MPI_Reduce, and shared). No MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_COMM_H
#define STEP_RUNTIME_COMM_H

#include "runtime/Tensor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace step::rt {

enum class CommOp { Sum, Max, Min };

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "self", "threads", "mpi": for messages.
  virtual std::string kind() const = 0;
  /// Whether threads other than the one that made it may call its
  /// collectives, one thread at a time (the CPU executor's collective
  /// thread does). False for MPI without MPI_THREAD_SERIALIZED.
  virtual bool anyThread() const { return true; }

  /// out[i] = reduce over ranks of in[i] for `count` elements of `dtype`
  /// (F32, I32, I64 or I1 as bytes); `in` and `out` may be the same buffer.
  virtual void allReduce(const void *in, void *out, int64_t count,
                         DType dtype, CommOp op) = 0;
  /// out = the `bytes` of every rank's `in`, concatenated in rank order
  /// (size() * bytes).
  virtual void allGather(const void *in, void *out, int64_t bytes) = 0;
  /// Copies `bytes` of rank `root`'s `data` to every rank's `data`.
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
  /// Returns once every rank has called it.
  void barrier();
  /// Ends every rank of the job with exit code `code` (a rank that failed
  /// must not leave the others waiting in a collective).
  [[noreturn]] virtual void abortAll(int code);

  /// The communicator of this rank's group in a partition of this
  /// communicator's ranks: `color` is the group's index in the partition,
  /// `position` this rank's index in its group; `partition` names the
  /// partition (groups of one partition share it). Made on first use and
  /// kept. Collective over all ranks of this communicator: every rank asks
  /// for its group of the same partition, in the same order.
  Communicator &subgroup(const std::string &partition, int color,
                         int position);

protected:
  /// Makes the communicator of the group `color` (0-based index of this
  /// rank's group in the partition) with this rank at position `key`.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

private:
  std::map<std::string, std::unique_ptr<Communicator>> groups_;
};

/// A group of one rank.
Communicator &selfCommunicator();

/// This rank's group `color` (at `position`) of a partition of `parent`'s
/// ranks, built on `parent`'s own collectives: every group collective is
/// an all_gather over the whole parent, of which each rank keeps its
/// group's part (reductions combine the members in position order, as a
/// thread group does). So it is lockstep: every rank of `parent` calls each
/// collective of the partition together, each on its own group, with the
/// same byte count, as the ranks of one plan do. Costs parent-size times
/// the group's traffic; for communicators without native subgroups (TCP).
/// Collective over `parent` (exchanges every rank's color and position).
std::unique_ptr<Communicator> lockstepSubgroup(Communicator &parent, int color,
                                               int position);

/// `size` communicators of one process, one per thread that uses it; rank
/// i must be used by one thread only. Collectives block until every rank
/// has called them.
std::vector<std::unique_ptr<Communicator>> makeThreadGroup(int size);

/// Whether this build has MPI (STEP_HAVE_MPI).
bool haveMpi();
/// Whether the process was started by an MPI launcher (mpirun sets
/// OMPI_COMM_WORLD_SIZE or PMI_SIZE / PMIX_RANK).
bool launchedByMpi();
/// MPI_COMM_WORLD, initializing MPI on first use (finalized at exit).
/// Throws Error when the build has no MPI.
Communicator &mpiCommunicator();
/// Where rank 0 of a TCP world listens and the others connect.
struct TcpOptions {
  std::string host = "127.0.0.1";
  int port = 29500;
  /// How long ranks wait for the others to join.
  double timeoutSeconds = 120;
};
/// This process's rank of a world of `size` ranks joined over TCP (every
/// rank calls it with the same options); throws Error naming the rank,
/// the address and what failed (timeout, a rank's world size differing).
std::unique_ptr<Communicator> connectTcp(int rank, int size,
                                         const TcpOptions &options);
/// Whether the environment names a world (STEP_WORLD_SIZE or WORLD_SIZE).
bool launchedByEnv();
/// The TCP world the environment describes, joined on first use and kept
/// (STEP_CONNECT_TIMEOUT: seconds to wait, default 120). Throws Error
/// naming a variable that is missing or out of range.
Communicator &envCommunicator();
/// mpiCommunicator() when launchedByMpi(), else envCommunicator() when
/// launchedByEnv(), else selfCommunicator().
Communicator &worldCommunicator();
/// Ends every rank of the world this process joined (MPI_Abort, or closing
/// the TCP connections, which ends the peers' collectives) with exit code
/// `code`; returns when this process joined none.
void abortWorld(int code);

/// dst[i] = op(dst[i], src[i]) for `n` elements of `dtype` (F32, I32, I64;
/// I1 by max or min): the reduction every communicator computes.
void combineInto(void *dst, const void *src, int64_t n, DType dtype,
                 CommOp op);
/// Throws the Error combineInto would for `dtype` and `op`. Communicators
/// call it before a rank posts or sends anything, so that a refused
/// reduction fails on every rank alike with no rank left mid-collective.
void checkReducible(DType dtype, CommOp op);

/// The communicator collective kernels on this thread use.
Communicator &currentCommunicator();
/// Installs `comm` for the calling thread for the scope's lifetime.
class CommScope {
public:
  explicit CommScope(Communicator &comm);
  ~CommScope();
  CommScope(const CommScope &) = delete;
  CommScope &operator=(const CommScope &) = delete;

private:
  Communicator *previous_;
};

/// Replica groups of a collective op: `groupSize` consecutive entries of
/// `ranks` per group (step dialect's group_size and replica_groups).
struct ReplicaGroups {
  int64_t groupSize = 1;
  std::vector<int64_t> ranks{0};
};

/// The name of the partition `groups` describe ("2:0,1,2,3,"): equal
/// groups, equal names (Communicator::subgroup's `partition`).
std::string partitionName(const ReplicaGroups &groups);
/// Whether `groups` is one group of all its ranks in order: the
/// communicator itself, no subgroup.
bool isWholeWorld(const ReplicaGroups &groups);

/// The communicator of the calling rank's group in `groups`, checked
/// against `comm` (the number of ranks must be comm.size()); throws Error
/// naming `op` otherwise.
Communicator &groupOf(Communicator &comm, const ReplicaGroups &groups,
                      const std::string &op);

/// ZeRO layout (step.local_shard): `full` flattened and zero-padded to
/// count * S elements, S = ceil(numel / count); block `index` as [S].
HostTensor shardOf(const HostTensor &full, int64_t index, int64_t count);
/// The inverse: blocks 0..count-1 concatenated, cut to numel(shape) and
/// reshaped. Throws Error on mismatched dtypes or sizes.
HostTensor unshard(const std::vector<HostTensor> &blocks, const Shape &shape);

/// Tensor-parallel layout (meta "shard" "tp_split", docs/distributed.md):
/// rank `index` of `count`'s part of `full` along `dim`. Dim `dim` (size S)
/// is viewed as `groups` groups of S / groups; from each group g the rank
/// takes [g S/groups + index S/(groups count), g S/groups + (index + 1)
/// S/(groups count)), and these slices, concatenated in g order, are its
/// tensor: `full`'s shape with dim `dim` divided by `count`. groups > 1 is
/// a fused weight (q, k and v side by side: each rank takes its heads'
/// columns of each). Any dtype. Throws Error when `dim` is out of range, S
/// is not a multiple of groups * count, or `index` is not in [0, count).
HostTensor tpSliceOf(const HostTensor &full, int64_t dim, int64_t groups,
                     int64_t index, int64_t count);
/// The inverse: the full tensor from the parts of ranks 0..count-1
/// (`blocks` in that order, count = blocks.size()). Throws Error when the
/// blocks differ in dtype or shape, or `dim` or `groups` do not fit them.
HostTensor tpUnslice(const std::vector<HostTensor> &blocks, int64_t dim,
                     int64_t groups);

} // namespace step::rt

#endif // STEP_RUNTIME_COMM_H
