//===- step-run.cpp - Run training steps of a compiled artifact -----------===//
//
//   step-run MODEL.step --params DIR --inputs DIR [--steps N]
//            [--backend=auto|cpu|cuda] [--out DIR] [--trace=FILE.json]
//            [--profile [--profile-top N] [--peak-bandwidth GB/s]
//             [--peak-flops TFLOP/s]]
//            [--checkpoint DIR [--checkpoint-every K] [--resume]]
//
// Loads the artifact and the params (DIR/<step.name>.npy; optimizer state
// files are optional and start at zero), then runs N steps (default 1). The
// batches come from --inputs: a folder holding .npy files is one batch used by
// every step; a folder of numbered subfolders (0000/, 0001/, ...) feeds them
// in numeric order, cycling. Each step prints "step K loss = <%.9g>", K from
// 1. After the last step the params and state go to --out, each file
// atomically. --trace writes a Chrome trace (docs/profiling.md): every
// step and batch read, and the ops of the last step, each with its kernel,
// model line, bytes and FLOPs; its other keys keep the per-step wall times.
// --profile prints the kernels by total time (steps after the first).
//
// Any error (bad artifact, missing or mistyped .npy, a failing step) prints
// "step-run: error: ..." and exits 1 before anything is written; the params
// folder is only ever read.
//
// --checkpoint DIR keeps a training checkpoint in DIR (Session::save:
// params, state, the step count and the position in the batch folders,
// replaced atomically): every K steps with --checkpoint-every, and after
// the last step. With --resume, a run whose DIR holds a checkpoint starts
// from it instead of --params (and without one, from --params): it runs
// steps count+1 .. N on the batches an uninterrupted run would have used,
// so a run killed at any moment and resumed ends bit-identical to one that
// was never interrupted (tests/e2e/checkpoint_kill.py).
//
// A sharded artifact (stepc --shard) runs as one rank of `mpirun -np N
// step-run ...` (docs/distributed.md): the params and batches are the same
// files on every rank, each input holding the global batch, of which rank r
// takes rows [d * B / D, (d + 1) * B / D) of its data-parallel index
// d = r / T among D = N / T replicas, T the tensor-parallel degree (stepc
// --shard=tp:T; 1 otherwise, so d = r and D = N): the T ranks of one
// tensor-parallel group take the same rows. Rank 0 prints the losses (the
// same on every rank) and writes --out (full tensors) and --trace. An error
// on one rank ends all of them (MPI_Abort). Without MPI, the ranks come
// from the environment (STEP_RANK, STEP_WORLD_SIZE, STEP_MASTER_ADDR,
// STEP_MASTER_PORT, or torchrun's names) and join over TCP.
//
//===----------------------------------------------------------------------===//

#include "runtime/Npy.h"
#include "runtime/Profile.h"
#include "runtime/TokenData.h"
#include "runtime/Session.h"
#include "runtime/cpu/Kernels.h"
#include "tools/Validators.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;
using step::rt::Error;
using step::rt::HostTensor;

namespace {
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool allDigits(const std::string &s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The batch folders under `dir`: `dir` itself when it holds .npy files,
/// else its numbered subfolders in numeric order.
std::vector<fs::path> batchFolders(const std::string &dir) {
  if (!fs::is_directory(dir))
    throw Error("--inputs: '" + dir + "' is not a folder");
  std::vector<std::pair<unsigned long long, fs::path>> numbered;
  bool hasNpy = false;
  for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".npy")
      hasNpy = true;
    else if (e.is_directory() && allDigits(name) && name.size() < 19)
      numbered.emplace_back(std::stoull(name), e.path());
  }
  if (hasNpy)
    return {fs::path(dir)};
  if (numbered.empty())
    throw Error("--inputs: '" + dir +
                "' holds neither .npy files nor numbered batch folders "
                "(0000/, 0001/, ...)");
  std::sort(numbered.begin(), numbered.end());
  for (size_t i = 1; i < numbered.size(); ++i)
    if (numbered[i].first == numbered[i - 1].first)
      throw Error("--inputs: batch folders " + numbered[i - 1].second.string() +
                  " and " + numbered[i].second.string() +
                  " have the same number");
  std::vector<fs::path> out;
  for (auto &entry : numbered)
    out.push_back(entry.second);
  return out;
}

/// Rows [r * B / n, (r + 1) * B / n) of a global batch tensor: replica r's
/// of n data-parallel replicas (`tp`: the tensor-parallel degree, for
/// messages).
HostTensor rowsOfRank(const std::string &name, const HostTensor &t, int r,
                      int n, int tp) {
  if (t.rank() < 1 || t.shape()[0] % n != 0)
    throw Error("input '" + name + "' of shape " +
                step::rt::shapeToString(t.shape()) + " does not split into " +
                std::to_string(n) + " ranks along dim 0" +
                (tp > 1 ? " (the data-parallel replicas: " +
                              std::to_string(n * tp) + " ranks in groups of " +
                              std::to_string(tp) + " tensor-parallel ranks)"
                        : std::string()));
  std::vector<int64_t> start(t.shape().size(), 0), limit = t.shape(),
                       strides(t.shape().size(), 1);
  int64_t rows = t.shape()[0] / n;
  start[0] = r * rows;
  limit[0] = start[0] + rows;
  return step::rt::cpu::slice(t, start, limit, strides);
}

/// This rank's rows of a global batch when there are several
/// data-parallel replicas.
std::map<std::string, HostTensor>
ownRows(const step::Session &session, std::map<std::string, HostTensor> batch) {
  if (session.dataWorldSize() > 1)
    for (auto &[name, t] : batch)
      t = rowsOfRank(name, t, session.dataRank(), session.dataWorldSize(),
                     session.tensorParallel());
  return batch;
}

/// One <name>.npy per input of the step; this rank's rows.
std::map<std::string, HostTensor> readBatch(const step::Session &session,
                                            const fs::path &dir) {
  std::map<std::string, HostTensor> batch;
  for (const std::string &name : session.inputNames()) {
    fs::path path = dir / (name + ".npy");
    if (!fs::exists(path))
      throw Error("missing input '" + name + "': " + path.string() +
                  " does not exist");
    batch[name] = step::rt::readNpy(path.string());
  }
  return ownRows(session, std::move(batch));
}

/// --tokens: batches of the token file made ahead by a prefetcher
/// (docs/data.md). The step's inputs must be exactly `tokens` and
/// `targets`, [B, T] of one integer dtype; the file's batches are global
/// (B times the data-parallel replicas), of which this rank takes its rows.
std::unique_ptr<step::rt::Prefetcher>
tokenPrefetcher(const step::Session &session, const std::string &path,
                uint64_t seed, int depth, int64_t first) {
  std::vector<std::string> inputs = session.inputNames();
  std::sort(inputs.begin(), inputs.end());
  if (inputs != std::vector<std::string>{"targets", "tokens"})
    throw Error("--tokens: the step's inputs must be 'tokens' and 'targets' "
                "(a language model's), but they are: " +
                [&] {
                  std::string list;
                  for (const std::string &n : session.inputNames())
                    list += (list.empty() ? "" : ", ") + n;
                  return list;
                }());
  const step::rt::Plan &plan = session.artifact().plan;
  const step::rt::BufferDesc *tok = nullptr, *tgt = nullptr;
  for (const step::rt::BufferDesc &b : plan.buffers)
    if (b.kind == step::rt::BufferKind::Input)
      (b.name == "tokens" ? tok : tgt) = &b;
  if (tok->shape.size() != 2 || tgt->shape != tok->shape ||
      tgt->dtype != tok->dtype)
    throw Error("--tokens: 'tokens' and 'targets' must both be [B, T] of "
                "one dtype; the step has " +
                step::rt::shapeToString(tok->shape) + " " +
                step::rt::dtypeName(tok->dtype) + " and " +
                step::rt::shapeToString(tgt->shape) + " " +
                step::rt::dtypeName(tgt->dtype));
  step::rt::BatchSpec spec;
  spec.batch = tok->shape[0] * session.dataWorldSize();
  spec.context = tok->shape[1];
  spec.seed = seed;
  spec.dtype = tok->dtype;
  return std::make_unique<step::rt::Prefetcher>(
      std::make_shared<const step::rt::TokenFile>(path), spec, first, depth);
}

struct Options {
  std::string artifact, params, inputs, out, shardsOut, trace,
      backend = "auto", checkpoint, tokens;
  uint64_t seed = 0;
  int prefetch = 2;
  int64_t steps = 1, checkpointEvery = 0;
  bool resume = false, noOverlap = false, profile = false;
  bool tuneMatmuls = false;
  std::string tuneCache;
  size_t profileTop = 20;
  double peakBandwidth = 0, peakFlops = 0; // GB/s, TFLOP/s; 0: unknown
};

/// The data-loader position a checkpoint records: which batch folder the
/// next step reads.
nlohmann::json dataPosition(const Options &o, size_t folders, size_t next) {
  return {{"inputs", o.inputs}, {"batch_folders", folders},
          {"next_batch", next}};
}

/// The batch folder index the checkpoint's next step reads; checks that the
/// batches are the ones the checkpoint was taken on (their count).
size_t resumePosition(const Options &o, const step::rt::Checkpoint &c,
                      size_t folders) {
  const nlohmann::json &d = c.data;
  for (const char *field : {"batch_folders", "next_batch"}) {
    if (!d.contains(field))
      throw Error("--resume: the checkpoint in " + o.checkpoint +
                  " records no batch position (not written by step-run)");
    if (!d[field].is_number_unsigned())
      throw Error("--resume: the checkpoint in " + o.checkpoint + " records " +
                  field + " = " + d[field].dump() +
                  ", not a whole number (a damaged manifest.json?)");
  }
  size_t had = d["batch_folders"].get<size_t>();
  size_t next = d["next_batch"].get<size_t>();
  if (had != folders || next >= folders)
    throw Error("--resume: the checkpoint in " + o.checkpoint +
                " was taken reading " + std::to_string(had) +
                " batch folder(s) from " + d.value("inputs", "?") +
                ", but --inputs " + o.inputs + " has " +
                std::to_string(folders) +
                "; the batch position would not mean the same");
  return next;
}

int run(const Options &o) {
  auto t0 = Clock::now();
  step::SessionOptions sessionOptions;
  sessionOptions.backend = step::backendFromName(o.backend);
  sessionOptions.overlapCollectives = !o.noOverlap;
  sessionOptions.tuneMatmuls = o.tuneMatmuls;
  sessionOptions.tuneCache = o.tuneCache;
  step::Session session(o.artifact, sessionOptions);
  // --tokens: step k reads batch k of the token file, so a resumed run
  // needs no position; batch folders are counted and cycled.
  bool fromTokens = !o.tokens.empty();
  std::vector<fs::path> batches =
      fromTokens ? std::vector<fs::path>{} : batchFolders(o.inputs);
  bool haveCheckpoint = false;
  if (!o.checkpoint.empty()) {
    step::rt::checkCheckpointFolder(o.checkpoint); // before any step runs
    haveCheckpoint = step::rt::hasCheckpoint(o.checkpoint);
    // Without --resume a run would start over and replace a checkpoint
    // that may be further along: refused, nothing lost.
    if (haveCheckpoint && !o.resume)
      throw Error("--checkpoint " + o.checkpoint +
                  " holds a checkpoint of an earlier run; pass --resume to "
                  "continue from it, or name another folder (this run "
                  "would replace it)");
  }
  // Where the run starts: a checkpoint's step and batch, or step 0.
  int64_t first = 0;
  size_t next = 0;
  if (haveCheckpoint) {
    step::rt::Checkpoint c = session.load(o.checkpoint);
    first = c.step;
    if (!fromTokens)
      next = resumePosition(o, c, batches.size());
    if (session.rank() == 0)
      std::fprintf(stderr,
                   first < o.steps
                       ? "step-run: resumed from %s after step %lld\n"
                       : "step-run: %s is at step %lld, --steps reached\n",
                   o.checkpoint.c_str(), static_cast<long long>(first));
  } else {
    session.load_params(o.params);
  }
  double setupSeconds = secondsSince(t0);

  // With one batch folder, read it once; otherwise read each step's folder
  // when its turn comes, so large datasets need not fit in memory.
  std::map<std::string, HostTensor> fixed;
  if (batches.size() == 1)
    fixed = readBatch(session, batches[0]);
  std::unique_ptr<step::rt::Prefetcher> prefetcher =
      fromTokens ? tokenPrefetcher(session, o.tokens, o.seed, o.prefetch, first)
                 : nullptr;

  nlohmann::json steps = nlohmann::json::array();
  using step::rt::Lane;
  step::rt::ChromeTrace chrome;
  std::vector<step::rt::RunTimeline> profiled;
  bool tracing = !o.trace.empty() && session.rank() == 0;
  for (int64_t k = first; k < o.steps; ++k) {
    std::string batchName = fromTokens
                                ? o.tokens + " batch " + std::to_string(k)
                                : batches[next].string();
    if (!fromTokens)
      next = (next + 1) % batches.size();
    bool last = k + 1 == o.steps;
    // Op-level timelines: the last step for --trace; every step but the
    // first (a warm-up) for --profile, or the only one.
    bool timeOps = (tracing && last) ||
                   (o.profile && (k > first || o.steps - first == 1));
    step::rt::RunTimeline timeline;
    auto start = Clock::now();
    double loss, readStart = step::rt::steadySeconds(), readEnd = readStart;
    try {
      std::map<std::string, HostTensor> read;
      if (prefetcher)
        read = ownRows(session, prefetcher->next());
      else if (batches.size() != 1)
        read = readBatch(session, batchName);
      readEnd = step::rt::steadySeconds();
      timeline.start = readEnd;
      loss = session.step(batches.size() == 1 ? fixed : read,
                          timeOps ? &timeline : nullptr);
    } catch (const Error &e) {
      throw Error("step " + std::to_string(k + 1) + " (batch " + batchName +
                  "): " + e.what());
    }
    double seconds = secondsSince(start);
    if (!timeOps)
      timeline.end = step::rt::steadySeconds();
    if (tracing) {
      if (batches.size() != 1)
        chrome.addSpan(fromTokens ? "wait for batch" : "read batch", "input",
                       Lane::Input, readStart, readEnd,
                       {{"batch", batchName}});
      chrome.addRun(k + 1, timeline, timeOps && last);
    }
    if (o.profile && timeOps)
      profiled.push_back(std::move(timeline));
    if (!o.checkpoint.empty() &&
        (last || (o.checkpointEvery > 0 && (k + 1) % o.checkpointEvery == 0)))
      session.save(o.checkpoint,
                   fromTokens ? nlohmann::json{{"tokens", o.tokens},
                                               {"next_batch", k + 1}}
                              : dataPosition(o, batches.size(), next));
    if (session.rank() != 0)
      continue;
    std::printf("step %lld loss = %.9g\n", static_cast<long long>(k + 1), loss);
    std::fflush(stdout);
    steps.push_back({{"step", k + 1},
                     {"batch", batchName},
                     {"loss", std::isfinite(loss) ? nlohmann::json(loss)
                                                  : nlohmann::json(nullptr)},
                     {"wall_s", seconds}});
  }

  if (!o.out.empty())
    session.save_params(o.out);
  if (!o.shardsOut.empty())
    session.save_shards(o.shardsOut);
  if (tracing) {
    // A Chrome trace (Perfetto opens it); the other keys are metadata to
    // its readers, and what this file held before the trace events.
    nlohmann::json trace = chrome.toJson();
    trace["artifact"] = o.artifact;
    trace["backend"] = step::backendName(session.backend());
    trace["setup_s"] = setupSeconds;
    trace["steps"] = steps;
    trace["total_s"] = secondsSince(t0);
    trace["idle_between_steps"] = chrome.idleBetweenRuns();
    step::Session::DeviceMemoryUse mem = session.deviceMemory();
    if (mem.allocatedBytes >= 0)
      trace["device_memory"] = {{"arena_bytes", mem.arenaBytes},
                                {"allocated_bytes", mem.allocatedBytes},
                                {"measured_bytes", mem.measuredBytes},
                                {"total_bytes", mem.totalBytes}};
    step::rt::writeFileAtomic(o.trace, trace.dump(1) + "\n", "--trace");
  }
  if (o.profile && session.rank() == 0) {
    step::rt::DevicePeaks peaks;
    peaks.device = step::backendName(session.backend());
    peaks.bytesPerSecond = o.peakBandwidth * 1e9;
    peaks.flopsPerSecond = o.peakFlops * 1e12;
    std::printf("profile: %zu step(s) on the %s backend, kernels by total "
                "time\n%s",
                profiled.size(), step::backendName(session.backend()),
                step::rt::profileTable(step::rt::profileKernels(profiled),
                                       o.profileTop, peaks)
                    .c_str());
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"Runs training steps of a compiled StepJIT artifact (.step), "
               "with params, state and batches as .npy files."};
  app.add_option("artifact", o.artifact, "compiled model (.step)")->required();
  app.add_option("--params", o.params,
                 "folder with <name>.npy per param (state files optional)")
      ->required();
  CLI::Option *inputs = app.add_option(
      "--inputs", o.inputs,
      "folder with <name>.npy per input, or numbered batch folders 0000/, "
      "0001/, ... (used in order, cycling)");
  CLI::Option *tokens = app.add_option(
      "--tokens", o.tokens,
      "a token file (docs/data.md): step K trains on its batch K of random "
      "windows, made ahead on a background thread");
  inputs->excludes(tokens);
  app.add_option("--seed", o.seed, "--tokens: the windows' seed")
      ->needs(tokens)
      ->capture_default_str();
  app.add_option("--prefetch", o.prefetch,
                 "--tokens: batches made ahead (0: each in its step, on "
                 "this thread)")
      ->needs(tokens)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--steps", o.steps, "number of steps")
      ->check(step::tools::PositiveInteger)
      ->capture_default_str();
  app.add_option("--backend", o.backend, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--out", o.out,
                 "folder for the updated params and state (default: none)");
  app.add_option("--shards-out", o.shardsOut,
                 "a sharded run's per-rank checkpoint: each rank's blocks in "
                 "rank<R>/, the rest and shards.json beside them; --params "
                 "loads it into any world size");
  app.add_option("--trace", o.trace,
                 "write a Chrome trace (Perfetto): every step, the batch "
                 "reads, and each op of the last step with its kernel, model "
                 "line, bytes and FLOPs (docs/profiling.md)");
  app.add_flag("--profile", o.profile,
               "print the kernels by total time over the steps after the "
               "first, with achieved GB/s and TFLOP/s");
  app.add_option("--profile-top", o.profileTop, "rows of --profile")
      ->check(step::tools::PositiveInteger)
      ->capture_default_str();
  app.add_option("--peak-bandwidth", o.peakBandwidth,
                 "the device's memory bandwidth in GB/s, for --profile's "
                 "shares of peak (H100 SXM: 3350)")
      ->check(CLI::PositiveNumber);
  app.add_option("--peak-flops", o.peakFlops,
                 "the device's peak in TFLOP/s, for --profile's shares of "
                 "peak (H100 SXM dense bf16: 989)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--tune-matmuls", o.tuneMatmuls,
               "CUDA: time cuBLASLt's candidate algorithms of each matmul "
               "shape before the first step and keep the fastest (kept on "
               "disk for later runs: --tune-cache; docs/runtime.md)");
  app.add_option("--tune-cache", o.tuneCache,
                 "with --tune-matmuls: the file that keeps the picks for "
                 "later runs on this device and cuBLASLt, which take them "
                 "untimed and so compute the same bits (default: "
                 "stepjit/cublaslt-tuned.json in $XDG_CACHE_HOME or "
                 "~/.cache; none: no file)")
      ->needs("--tune-matmuls");
  app.add_flag("--no-overlap", o.noOverlap,
               "run a sharded step's collectives in place, in plan order, "
               "instead of beside the compute steps (same results)");
  CLI::Option *checkpoint = app.add_option(
      "--checkpoint", o.checkpoint,
      "folder of the training checkpoint (params, state, step count, batch "
      "position), replaced atomically; written after the last step");
  app.add_option("--checkpoint-every", o.checkpointEvery,
                 "also write the checkpoint every K steps")
      ->check(step::tools::PositiveInteger)
      ->needs(checkpoint);
  app.add_flag("--resume", o.resume,
               "start from the checkpoint in --checkpoint DIR when there is "
               "one (else from --params) and run up to --steps in all")
      ->needs(checkpoint);
  CLI11_PARSE(app, argc, argv);
  if (o.inputs.empty() == o.tokens.empty()) {
    std::cerr << "step-run: error: give the batches as --inputs DIR or "
                 "--tokens FILE (one of them)\n";
    return 1;
  }

  try {
    return run(o);
  } catch (const std::exception &e) {
    std::cerr << "step-run: error: " << e.what() << "\n";
  }
  // One failing rank must not leave the others in a collective.
  step::rt::abortWorld(1);
  return 1;
}
