//===- Train.h - The training pipeline and an interpreter trainer -*- C++ -*-===//
//
// `buildTrainStep` turns a module holding `func.func @forward` (DESIGN.md
// section 3) into one holding only `func.func @train_step`:
//
//   @train_step(params..., state..., inputs...)
//       -> (loss, new params..., new state...)
//
// Params keep their {step.kind = "param", step.name} attributes; optimizer
// state arguments are {step.kind = "state"} named "opt.step" (tensor<i64>,
// updates done so far, 0 at the start) and "opt.<slot>.<param>" (slots
// exp_avg, exp_avg_sq for AdamW/LAMB, momentum_buffer for SGD with
// momentum), all zero at the start as in PyTorch; inputs keep theirs, with
// the leading (batch) dim multiplied by `gradAccum`. Results carry the
// step.name of the argument they replace (the loss is "loss"), so the
// outputs of one step are the inputs of the next.
//
// `Trainer` runs that step on the reference interpreter, keeping params and
// state between steps: what the examples use until the runtime arrives.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_COMPILER_PIPELINE_TRAIN_H
#define STEP_COMPILER_PIPELINE_TRAIN_H

#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace step {

/// An optimizer and its hyper-parameters. Unset values take PyTorch's
/// defaults for the kind (AdamW: lr 1e-3, betas 0.9/0.999, eps 1e-8,
/// weight decay 0.01; SGD: lr 1e-3, momentum 0, dampening 0, weight decay 0;
/// LAMB: AdamW's with eps 1e-6).
struct OptimizerOptions {
  enum class Kind { Sgd, Adamw, Lamb };
  Kind kind = Kind::Adamw;
  std::optional<double> lr, beta1, beta2, eps, weightDecay, momentum,
      dampening;
  bool nesterov = false;
  /// Weight decay on params of rank < 2 (biases, norm weights) as well, as
  /// PyTorch with one param group; false: matrices and embeddings only, as
  /// nanoGPT's two param groups.
  bool decayVectors = true;

  /// Parses "adamw,lr=3e-4,wd=0.1" (keys: lr, beta1, beta2, eps, wd |
  /// weight_decay, momentum, dampening, nesterov, wd_vectors). Throws
  /// std::invalid_argument naming the bad part and what is expected.
  static OptimizerOptions parse(const std::string &spec);
};

/// The learning rate as a function of the update number s = 0, 1, ...
/// (the value the s-th update uses; PyTorch's LambdaLR order:
/// optimizer.step() then scheduler.step()). With w = warmup, T = total:
///   s < w:       lr * (s + 1) / w                          (any kind)
///   constant:    lr
///   cosine:      lr * (m + (1 - m) * (1 + cos(pi * p)) / 2)
///   linear:      lr * (m + (1 - m) * (1 - p))
/// where p = min(1, (s - w) / max(1, T - w)) and m = minRatio.
struct ScheduleOptions {
  enum class Kind { Constant, Cosine, Linear };
  Kind kind = Kind::Constant;
  int64_t warmup = 0;
  int64_t total = 0;
  double minRatio = 0.0;

  /// Parses "cosine,warmup=100,total=1000[,min_ratio=0.1]" (kinds:
  /// constant, cosine, linear). Cosine and linear need total > warmup.
  static ScheduleOptions parse(const std::string &spec);
};

/// Mixed precision (step-amp, docs/amp.md): `--amp=bf16|fp16`,
/// `--amp-keep-f32=layer_norm,...` and `--loss-scale=auto|none|dynamic
/// [,init=S][,growth=G][,backoff=B][,interval=N]`.
struct AmpOptions {
  std::string dtype; ///< "" (off), "bf16" or "fp16"
  std::vector<std::string> keepF32;
  std::string lossScale = "auto"; ///< auto: dynamic for fp16, none for bf16
  double initScale = 65536.0, growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;

  /// Parses `--amp` and `--amp-keep-f32` (a comma list) and `--loss-scale`;
  /// throws std::invalid_argument naming the flag and the bad part.
  static AmpOptions parse(const std::string &dtype, const std::string &keep,
                          const std::string &lossScale);
};

/// Recomputation (step-remat, docs/remat.md): `--remat=none|auto|max` or
/// `--remat-budget=BYTES`, the arena bytes the step's memory plan must fit.
struct RematOptions {
  std::string mode = "none"; ///< none | auto | max | budget
  int64_t budget = 0;        ///< bytes, mode budget only

  /// Parses `--remat` and `--remat-budget` (a byte count: digits with an
  /// optional K/M/G/T (x1000) or KiB/MiB/GiB/TiB (x1024) suffix, e.g.
  /// 2GiB, 1.5e9). A budget sets mode budget; with another mode than none
  /// it is an error. Throws std::invalid_argument naming the bad flag.
  static RematOptions parse(const std::string &mode,
                            const std::string &budget);
};

/// Offloading (step-offload, docs/remat.md): `--offload=none|auto|all`
/// with the cost model's machine figures as `key=value` (link, flops, hbm
/// in per-second units; max_exposed a share of the modeled step time).
struct OffloadOptions {
  std::string mode = "none"; ///< none | auto | all
  double linkBandwidth = 25e9, deviceFlops = 200e12, memoryBandwidth = 2e12;
  double maxExposed = 0;
  int64_t minBytes = 0;

  /// Parses `MODE[,link=B/s,flops=F/s,hbm=B/s,max_exposed=X,min_bytes=N]`;
  /// throws std::invalid_argument naming the flag and the bad part.
  static OffloadOptions parse(const std::string &spec);
};

/// Data parallelism and ZeRO (step-shard, docs/distributed.md):
/// `--shard=dp|zero1|zero2|zero3|tp:T[,bucket=BYTES][,prefetch=0|1]` on
/// `--world-size=N` replicas.
struct ShardOptions {
  std::string mode = "none"; ///< none | dp | zero1 | zero2 | zero3 | tp
  int64_t worldSize = 1;
  /// Mode tp (`--shard=tp:T`): ranks per tensor-parallel group; the
  /// world's worldSize / tp groups are data-parallel replicas.
  int64_t tp = 1;
  /// Gradient buckets (DDP's bucket_cap_mb, same default); 0: one
  /// collective per gradient.
  int64_t bucketBytes = 25 << 20;
  /// zero3: gather a layer's params one layer ahead (step-shard prefetch).
  bool prefetch = true;

  /// Parses `--shard` (a mode or tp:T, then bucket=BYTES with the suffixes of
  /// --remat-budget, or 0, and for zero3 prefetch=0 or 1) and `--world-size` (>= 1; other than 1 only with
  /// a mode). Throws std::invalid_argument naming the flag and what is
  /// expected.
  static ShardOptions parse(const std::string &spec, int64_t worldSize);
};

struct TrainOptions {
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  /// Clip gradients to this global L2 norm (torch.nn.utils.clip_grad_norm_).
  std::optional<double> clipNorm;
  /// Return "guard.finite" (step-optimizer's guard-finite): the runtime
  /// then refuses a step whose loss or gradients are not finite and names
  /// the op that made the first NaN/Inf (docs/training.md).
  bool guardFinite = false;
  /// Micro-batches per update (step-grad-accum); 1 = off.
  int64_t gradAccum = 1;
  AmpOptions amp;
  /// Run step-fuse on @train_step (docs/fusion.md). Fusion never changes a
  /// result on the CPU; it decides which kernels run on a GPU.
  bool fuse = true;
  /// step-fuse's gelu-epilogues: GPT-2's GELU forward stores its input from
  /// the matmul (cuBLASLt GELU_AUX_BIAS) and its backward, with the bias
  /// gradient, is the matmul's DGELU_BGRAD epilogue (docs/fusion.md). Off
  /// by default until a GPU run has checked and timed it.
  bool geluEpilogues = false;
  /// Run step-fuse-bias-grad: a bias gradient no kernel computes on the
  /// way (GPT-2's q/k/v bias) is the weight gradient matmul's BGRADA or
  /// BGRADB epilogue (docs/fusion.md). Off by default until a GPU run has
  /// checked and timed it.
  bool bgradEpilogues = false;
  /// Run step-attention-stats: each attention saves its rows' log-sum-exp
  /// for its gradient (docs/training.md). Off: the gradient recomputes the
  /// statistics (stepc --no-attention-stats, for A/B timing).
  bool attentionStats = true;
  /// step-layer-norm-stats: a layer norm's gradient reads the forward's
  /// mean and rstd (stepc --no-layer-norm-stats recomputes them, for A/B
  /// timing).
  bool layerNormStats = true;
  /// Mark every attention_grad `step.saved_ds`: its CUDA kernels store dS
  /// once (the dk/dv launch) for a dq launch instead of computing the
  /// scores twice (stepc --attention-saved-ds; docs/codegen.md). Off by
  /// default until a GPU run has timed it.
  bool attentionSavedDs = false;
  /// Mark every attention_grad `step.atomic_dq`: its CUDA kernels add dq
  /// into an f32 accumulator with atomics from the dk/dv launch, five tile
  /// products a pair and no dS in memory, as FlashAttention-2's backward;
  /// dq's bits may then differ between runs (stepc --attention-atomic-dq;
  /// docs/codegen.md). Off by default until a GPU run has timed it.
  bool attentionAtomicDq = false;
  /// Bucket size per symbolic dim (step-pad-dynamic, docs/dynamic-shapes.md);
  /// a symbol left out is padded to its maximum. Ignored by static models.
  std::map<std::string, int64_t> buckets;
  /// What step-remat recomputes; it runs after CSE, before step-fuse (and
  /// also in mode none when the model has checkpoint scopes).
  RematOptions remat;
  /// What step-offload moves to host memory: after step-remat, except with
  /// a budget, where it runs between the min-cut and the segment search
  /// if that order meets the budget (docs/remat.md).
  OffloadOptions offload;
  /// ZeRO-Offload (step-offload-optimizer, docs/distributed.md): params
  /// and optimizer state in host memory, the update on the host CPU. Runs
  /// last, after step-fuse.
  bool offloadOptimizer = false;
  /// How the step is split across replicas: after step-optimizer, before
  /// inlining (the model is traced for one replica's batch).
  ShardOptions shard;
};

/// The learning rate that update s (0-based) uses, in double: the formula
/// of ScheduleOptions, which @train_step evaluates in f32.
double learningRate(const TrainOptions &options, int64_t s);

/// What one pass of the pipeline did, for `stepc --report`.
struct PassRecord {
  std::string pass;
  int64_t opsBefore = 0, opsAfter = 0;
  /// Wall-clock seconds the pass ran (its nested passes included).
  double seconds = 0;
  /// Pass-specific counts ("gradients", "params", "micro_batches", ...).
  std::map<std::string, int64_t> counts;
};

/// Runs the training pipeline on `module` in place (errors are emitted as
/// diagnostics on its context). On success the module holds only
/// @train_step.
mlir::LogicalResult buildTrainStep(mlir::ModuleOp module,
                                   const TrainOptions &options,
                                   std::vector<PassRecord> *report = nullptr);

/// The fusions of `func` for `stepc --report`: per fusion its kind, the
/// ops it holds (names, in order) and the bytes it reads (its inputs) and
/// writes (its results), plus totals; and under "kernels" the same totals
/// over every top-level op that moves data (fusions, bare ops, matmuls,
/// collectives, offload copies; not views, constants or the return): the
/// step's traffic.
nlohmann::json describeFusions(mlir::func::FuncOp func);

/// The saved activations of a train step (passes/Activations.h) for
/// `stepc --report`: how many, their bytes, and the `largest` biggest (op,
/// type, bytes).
nlohmann::json describeActivations(mlir::func::FuncOp func,
                                   size_t largest = 8);

/// What step-remat did to a train step (its `step.remat` dictionary) for
/// `stepc --report`: mode, planned peak before/after, saved bytes
/// before/after, recomputed ops and FLOPs and their share of the step's.
/// Null when the pass did not run.
nlohmann::json describeRemat(mlir::func::FuncOp func);

/// What step-offload did (its `step.offload` dictionary) for
/// `stepc --report`: mode, values and bytes offloaded, planned peak before
/// and after, host arena, modeled step time and exposed copy time. Null
/// when the pass did not run.
nlohmann::json describeOffload(mlir::func::FuncOp func);
/// The `step.offload_optimizer` dictionary (null when not applied).
nlohmann::json describeOffloadOptimizer(mlir::func::FuncOp func);

/// What step-shard did (its `step.shard` dictionary) for `stepc --report`
/// and the artifact's meta "shard": mode, world size, per-replica bytes of
/// params, gradients and optimizer state beside the unsharded ones, and
/// `sharded`: the full shape of every sharded argument by name. Null when
/// the step is not sharded.
nlohmann::json describeShard(mlir::func::FuncOp func);

/// Trains on the reference interpreter: parses a model (the text of a
/// module with @forward), builds its train step once, and keeps params and
/// optimizer state between calls of step().
class Trainer {
public:
  /// Throws rt::Error with the compiler's diagnostics if the model does not
  /// parse or the pipeline fails, or if a param is missing from `params`.
  Trainer(const std::string &modelMlir, const TrainOptions &options,
          std::map<std::string, rt::HostTensor> params);
  ~Trainer();

  /// One update on `batch` (every input by name, leading dim times
  /// gradAccum); returns the loss. Throws rt::Error on bad input.
  double step(const std::map<std::string, rt::HostTensor> &batch);

  /// Params and optimizer state ("opt.*") after the last step, by name.
  const std::map<std::string, rt::HostTensor> &state() const { return state_; }
  /// The @train_step module as text.
  std::string trainStepMlir() const;

private:
  std::unique_ptr<mlir::MLIRContext> context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  std::map<std::string, rt::HostTensor> state_;
};

} // namespace step

#endif // STEP_COMPILER_PIPELINE_TRAIN_H
