//===- Session.h - The host API: load an artifact, run steps ----*- C++ -*-===//
//
// A Session owns one compiled training step (a .step artifact) and the
// persistent tensors it updates: the params and the optimizer state, keyed by
// their step.name. Each step() feeds one batch of inputs, runs the plan on the
// chosen backend, replaces every param and state tensor by the plan result of
// the same name, and returns the loss (result 0).
//
// On the GPU the params and state stay in device memory between steps
// (docs/runtime.md, "Device-resident params and state"): a step uploads
// and downloads only inputs and the other results. get, gathered,
// save_params, save_shards and save download them when called; set,
// load_params and load change the host copies, which the next step
// uploads.
//
// Failure is all-or-nothing: a step, load_params or set that throws leaves
// every param and state tensor as it was (results are computed into
// temporaries and committed only on success). The exception: on the GPU a
// step whose updates are donated (written in place, docs/artifact.md) and
// that fails once its run has begun leaves them partly updated; the
// session then refuses get, save and step (naming the cause) until
// load_params, load or set give every param and state a new value. save_params
// writes each file atomically (temporary file + rename).
//
//   step::Session s("mlp.step");
//   s.load_params("ckpt/");              // w.npy, b.npy, ... (state optional)
//   double loss = s.step({{"x", x}, {"y", y}});
//   s.save_params("ckpt-1/");
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_SESSION_H
#define STEP_RUNTIME_SESSION_H

#include "runtime/Artifact.h"
#include "runtime/Checkpoint.h"
#include "runtime/Comm.h"
#include "runtime/Profile.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace step {
namespace rt::cuda {
class CudaExecutor;
struct CudaExecutorOptions;
} // namespace rt::cuda

enum class Backend { Auto, Cpu, Cuda };
/// "auto", "cpu", "cuda".
const char *backendName(Backend b);
/// The inverse of backendName; throws rt::Error naming the accepted words.
Backend backendFromName(const std::string &name);

struct SessionOptions {
  /// Auto picks CUDA when the build and the machine have it (a driver and a
  /// device), else the CPU reference backend. Cuda throws, with the reason,
  /// when it is not available.
  Backend backend = Backend::Auto;
  /// The replicas of a sharded step (stepc --shard, docs/distributed.md):
  /// this rank's communicator. Null: rt::worldCommunicator() (the ranks
  /// mpirun started, else those the environment names, else one). Its
  /// size must be the artifact's world size.
  rt::Communicator *communicator = nullptr;
  /// Runs a sharded step's collectives beside its compute steps (a thread
  /// on the CPU, a stream on the GPU; docs/runtime.md), each joined where
  /// its result is first needed. False: each at its place, in order.
  /// Same results either way.
  bool overlapCollectives = true;
  /// CUDA: time cuBLASLt's candidate algorithms of each matmul shape
  /// before the first step and keep the fastest
  /// (CudaExecutorOptions::tuneMatmuls; bits may differ between
  /// processes unless tuneCache keeps the picks). The CPU backend ignores
  /// it.
  bool tuneMatmuls = false;
  /// With tuneMatmuls, the file that keeps the picks across processes
  /// (runtime/cuda/MatmulTuneCache.h; a later run on the same device and
  /// cuBLASLt takes them untimed, so its bits match): empty,
  /// <rt::defaultCacheDir()>/cublaslt-tuned.json; "none": no file.
  std::string tuneCache = {};
};

class Session {
public:
  /// Reads and validates the artifact (rt::Error on any defect) and picks the
  /// backend. Optimizer state starts at zero; params have no value until
  /// load_params or set.
  explicit Session(const std::string &artifactPath,
                   SessionOptions options = {});
  /// A session over an artifact already in memory (JIT compilation, tests).
  explicit Session(rt::Artifact artifact, SessionOptions options = {});
  /// Not copyable: on the GPU the current params and state live in the
  /// session's executors, which a copy could only share (and overwrite).
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  Session(Session &&) = default;
  Session &operator=(Session &&) = default;

  /// Reads DIR/<name>.npy for every param (required) and every state tensor
  /// (a missing one is zeros, as PyTorch's lazily created optimizer state).
  /// Each file must match its buffer's dtype and shape exactly; a sharded
  /// buffer also takes the full tensor (meta "shard"), of which it keeps
  /// this rank's block (ZeRO) or tensor-parallel part (tp_split), so any
  /// world size loads the same files.
  void load_params(const std::string &dir);
  /// Writes DIR/<name>.npy for every param and state tensor (creating DIR),
  /// each file atomically. Throws, writing nothing, if a param has no value.
  /// Sharded: every rank must call it (blocks are all-gathered into full
  /// tensors); rank 0 writes.
  void save_params(const std::string &dir) const;
  /// Per-rank checkpoint (collective: every rank calls it): each rank
  /// writes its blocks of the ZeRO-sharded buffers to
  /// DIR/rank<R>/<name>.npy, rank 0 the others to DIR/<name>.npy (the
  /// tensor-parallel ones gathered into full tensors) and, last,
  /// DIR/shards.json (world size, full shapes of the blocked ones).
  /// load_params(DIR) reassembles the full tensors from the blocks, so any
  /// world size, sharded or not, loads it.
  void save_shards(const std::string &dir) const;

  /// A training checkpoint (runtime/Checkpoint.h, docs/runtime.md): every
  /// param and state tensor (full tensors when sharded), stepsDone() and
  /// `data`, the caller's record (a data-loader position), written
  /// atomically: the folder is the previous checkpoint or this one whatever
  /// moment the process dies. Collective when sharded (rank 0 writes).
  void save(const std::string &dir,
            const nlohmann::json &data = nlohmann::json::object()) const;
  /// Reads and verifies a checkpoint written by save() and takes its
  /// tensors and step count; returns its step and data (tensors moved
  /// out). The checkpoint must hold exactly this step's params and state,
  /// of the same dtypes and full shapes (any world size); throws rt::Error,
  /// changing nothing, otherwise.
  rt::Checkpoint load(const std::string &dir);
  /// Steps completed: step() calls that returned, plus the count of the
  /// checkpoint load() took.
  int64_t stepsDone() const { return stepsDone_; }

  /// Runs one step on `batch` (one tensor per input name, no others); keeps
  /// the new params and state and returns the loss.
  double step(const std::map<std::string, rt::HostTensor> &batch);
  /// The same, recording when each plan step ran into `timeline`
  /// (runtime/Profile.h; null: not recorded). On the GPU such a step runs
  /// its ops one by one with timing events instead of replaying the graph
  /// (the same results).
  double step(const std::map<std::string, rt::HostTensor> &batch,
              rt::RunTimeline *timeline);

  /// Buckets (docs/dynamic-shapes.md): a model with symbolic dims has one
  /// plan per bucket. step() takes inputs of any valid length up to the
  /// largest bucket, runs the smallest bucket that holds them (inputs
  /// zero-padded, `len.S` set) and returns outputs as the bucket computed
  /// them. 1 for a static model.
  size_t bucketCount() const { return 1 + artifact_.buckets.size(); }
  /// How many distinct buckets steps have run: each is one plan prepared
  /// (on the GPU, one CUDA graph), never more than bucketCount() (buckets
  /// dropped by dropBucket() still count).
  size_t bucketsUsed() const { return bucketsUsed_.size(); }

  /// The valid length of each symbol in `batch`, read off the inputs'
  /// symbolic dims (`dynamic` is the artifact's meta "dynamic"). Throws
  /// rt::Error when an input's rank is wrong, a length is outside 1..max or
  /// two inputs disagree on a symbol. Inputs `batch` lacks are skipped.
  static std::map<std::string, int64_t>
  lengthsOf(const nlohmann::json &dynamic,
            const std::map<std::string, rt::HostTensor> &batch);
  /// Whether a bucket of exactly these sizes (symbol -> size) is here.
  bool hasBucket(const std::map<std::string, int64_t> &sizes) const;
  /// Adds the plan of one more bucket (the JIT compiles buckets on first
  /// use). It must be the same model: the same "dynamic" signature, the
  /// same arguments under the same buffer ids, params and state of the same
  /// dtype and shape; a bucket of the same sizes must not be here yet.
  /// Throws rt::Error, changing nothing, otherwise.
  void addBucket(rt::Artifact bucket);
  /// Drops the bucket of these sizes and its device state (a bounded JIT
  /// cache evicts so); params and state stay. The last bucket is kept:
  /// returns false then, or when there is no such bucket.
  bool dropBucket(const std::map<std::string, int64_t> &sizes);

  /// A param, a state tensor, or another named result of the last step.
  /// On the GPU a param or state is downloaded first (then kept on the
  /// host until the next step changes it).
  const rt::HostTensor &get(const std::string &name) const;
  /// Replaces a param or state tensor; dtype and shape must match its buffer.
  void set(const std::string &name, rt::HostTensor t);
  /// A param or state tensor as one process would hold it: get(), or for a
  /// sharded one the ranks' blocks gathered (collective: every rank calls),
  /// or for a tensor-parallel one the parts of ranks 0..T-1 joined.
  rt::HostTensor gathered(const std::string &name) const;

  /// This process's rank and the number of ranks (1 unsharded).
  int rank() const { return comm_->rank(); }
  int worldSize() const { return comm_->size(); }
  /// The tensor-parallel degree T (meta "shard" "tp"; 1 without tensor
  /// parallelism). Ranks are laid out as rank = dataRank() * T +
  /// tensorParallelRank().
  int tensorParallel() const { return tp_; }
  /// This rank's index in its tensor-parallel group (rank % T): which part
  /// of each tp_split tensor it holds.
  int tensorParallelRank() const { return comm_->rank() % tp_; }
  /// This rank's index among the data-parallel replicas (rank / T): the T
  /// ranks of one tensor-parallel group share it and take the same rows of
  /// a global batch.
  int dataRank() const { return comm_->rank() / tp_; }
  /// The number of data-parallel replicas (worldSize() / T): how many
  /// parts a global batch is split into.
  int dataWorldSize() const { return comm_->size() / tp_; }

  /// Names in the order of the step's arguments.
  std::vector<std::string> paramNames() const { return params_; }
  std::vector<std::string> stateNames() const { return state_; }
  /// The inputs a batch supplies: a bucketed step's valid lengths
  /// (`len.S`, docs/dynamic-shapes.md) are the session's own, set from
  /// the batch's shapes, and left out.
  std::vector<std::string> inputNames() const;
  Backend backend() const { return backend_; }
  const rt::Artifact &artifact() const { return artifact_; }

  /// On the CUDA backend, the device memory of the executor that ran the
  /// last step (or the first one made): the planned arena, what was
  /// allocated, what cuMemGetInfo says was taken (-1 where unknown), the
  /// device's total. All -1 on the CPU backend.
  struct DeviceMemoryUse {
    int64_t arenaBytes = -1, allocatedBytes = -1, measuredBytes = -1,
            totalBytes = -1;
  };
  DeviceMemoryUse deviceMemory() const;

private:
  void init(rt::Communicator *communicator);
  /// Creates the device state of a GPU backend (loads kernels, uploads
  /// constants); nothing for the CPU.
  void startBackend(Backend requested);
  /// The CUDA executor's options: this rank's communicator.
  rt::cuda::CudaExecutorOptions cudaOptions() const;
  const rt::BufferDesc &argumentBuffer(const std::string &name) const;
  void checkMatches(const std::string &what, const std::string &name,
                    const rt::HostTensor &t) const;
  /// `t` for argument `name` as this rank holds it: a full tensor of a
  /// sharded buffer becomes this rank's block; then checked against the
  /// buffer (dtype and shape), naming `what`.
  rt::HostTensor localTensor(const std::string &what, const std::string &name,
                             rt::HostTensor t) const;
  /// Throws, naming `what`, when a param has no value yet.
  void requireParamValues(const std::string &what) const;
  /// Downloads the params and state on the device (onDevice_), or only
  /// `name` when it is one of them, into values_ (assigned into the
  /// existing entries, so pointers to them stay valid). The device copies
  /// stay current: the next step uploads none of them.
  void syncFromDevice() const;
  void syncFromDevice(const std::string &name) const;
  /// Takes `values` as the new host values of those params and state: the
  /// others still on the device are downloaded first (throwing, changing
  /// nothing, when that fails), then every executor is invalidated, so the
  /// next step uploads all of them from values_.
  void replaceValues(std::map<std::string, rt::HostTensor> values);
  /// Carries every param and state from the result of its name
  /// (CudaExecutor::setCarried) in an executor running `plan`.
  static void carry(rt::cuda::CudaExecutor &executor, const rt::Plan &plan);
  /// Moves the params and state on the device from holder_ to `to`
  /// (another bucket's executor, running `plan`) with device-to-device
  /// copies (CudaExecutor::adoptCarried), those `to` does not carry to
  /// the host; `to` becomes holder_. False, changing nothing, when there
  /// is nothing on the device or `to` carries a value that is not there.
  bool handOver(const std::shared_ptr<rt::cuda::CudaExecutor> &to,
                const rt::Plan &plan);

  /// The bucket `batch` needs (0: the artifact itself, i: buckets[i - 1])
  /// and the batch padded to it with its `len.S` inputs added.
  size_t pickBucket(const std::map<std::string, rt::HostTensor> &batch,
                    std::map<std::string, rt::HostTensor> &padded) const;
  const rt::Artifact &bucket(size_t i) const {
    return i == 0 ? artifact_ : artifact_.buckets[i - 1];
  }

  rt::Artifact artifact_;
  Backend backend_ = Backend::Cpu;
  /// This rank's communicator (selfCommunicator() unsharded).
  rt::Communicator *comm_ = nullptr;
  bool overlapCollectives_ = true;
  bool tuneMatmuls_ = false;
  std::string tuneCache_; ///< SessionOptions::tuneCache
  /// A CUDA step with donated updates failed after its run began: the
  /// device's params and state are partly updated, so get, save and step
  /// refuse until load_params, load or set replace all of them.
  bool deviceLost_ = false;
  /// Throws, naming `what`, while deviceLost_.
  void requireDeviceWhole(const std::string &what) const;
  /// Sharded arguments (meta "shard"): name -> full shape.
  std::map<std::string, rt::Shape> fullShapes_;
  /// How tensor parallelism splits a param or state tensor (meta "shard"
  /// "tp_split"): along `dim`, in `groups` groups, of the `full` shape.
  struct TpSplit {
    int64_t dim = 0, groups = 1;
    rt::Shape full;
  };
  std::map<std::string, TpSplit> tpSplits_;
  /// The tensor-parallel degree (meta "shard" "tp").
  int tp_ = 1;
  /// The CUDA backend's device state (Backend::Cuda only), one per bucket,
  /// made on the bucket's first step, by bucketKey(), each carrying the
  /// params and state (carry).
  std::map<std::string, std::shared_ptr<rt::cuda::CudaExecutor>> cuda_;
  /// The executor whose carried argument buffers may be current (it
  /// committed the last accepted step), or null; every other executor is
  /// invalidated, so it uploads from values_. Changes only with the
  /// executor a step uses, set/load_params/load and dropBucket.
  std::shared_ptr<rt::cuda::CudaExecutor> holder_;
  /// The params and state whose current value is in holder_'s argument
  /// buffers; their values_ entries are stale until syncFromDevice.
  mutable std::set<std::string> onDevice_;
  /// Buckets by bucketKey() (their meta "bucket" as text).
  std::set<std::string> bucketsUsed_;
  static std::string bucketKey(const rt::Artifact &a);
  std::vector<std::string> params_, state_, inputs_;
  /// step.name -> buffer id, for every argument.
  std::map<std::string, int64_t> argumentIds_;
  /// Params and state: current, except those in onDevice_ (mutable: const
  /// readers download them).
  mutable std::map<std::string, rt::HostTensor> values_;
  /// Results of the last step that replace no argument, by result name.
  std::map<std::string, rt::HostTensor> outputs_;
  int64_t stepsDone_ = 0;
};

} // namespace step

#endif // STEP_RUNTIME_SESSION_H
