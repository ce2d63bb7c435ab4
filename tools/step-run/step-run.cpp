//===- step-run.cpp - Run training steps of a compiled artifact -----------===//
//
//   step-run MODEL.step --params DIR --inputs DIR [--steps N]
//            [--backend=auto|cpu|cuda] [--out DIR] [--trace=FILE.json]
//            [--checkpoint DIR [--checkpoint-every K] [--resume]]
//
// Loads the artifact and the params (DIR/<step.name>.npy; optimizer state
// files are optional and start at zero), then runs N steps (default 1). The
// batches come from --inputs: a folder holding .npy files is one batch used by
// every step; a folder of numbered subfolders (0000/, 0001/, ...) feeds them
// in numeric order, cycling. Each step prints "step K loss = <%.9g>", K from
// 1. After the last step the params and state go to --out, each file
// atomically; --trace writes per-step wall times as JSON.
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

/// One <name>.npy per input of the step; this rank's rows when there are
/// several data-parallel replicas.
std::map<std::string, HostTensor> readBatch(const step::Session &session,
                                            const fs::path &dir) {
  std::map<std::string, HostTensor> batch;
  for (const std::string &name : session.inputNames()) {
    fs::path path = dir / (name + ".npy");
    if (!fs::exists(path))
      throw Error("missing input '" + name + "': " + path.string() +
                  " does not exist");
    batch[name] = step::rt::readNpy(path.string());
    if (session.dataWorldSize() > 1)
      batch[name] = rowsOfRank(name, batch[name], session.dataRank(),
                               session.dataWorldSize(),
                               session.tensorParallel());
  }
  return batch;
}

struct Options {
  std::string artifact, params, inputs, out, shardsOut, trace,
      backend = "auto", checkpoint;
  int64_t steps = 1, checkpointEvery = 0;
  bool resume = false, noOverlap = false;
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
  step::Session session(o.artifact, sessionOptions);
  std::vector<fs::path> batches = batchFolders(o.inputs);
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

  nlohmann::json steps = nlohmann::json::array();
  for (int64_t k = first; k < o.steps; ++k) {
    const fs::path &folder = batches[next];
    next = (next + 1) % batches.size();
    auto start = Clock::now();
    double loss;
    try {
      loss = batches.size() == 1 ? session.step(fixed)
                                 : session.step(readBatch(session, folder));
    } catch (const Error &e) {
      throw Error("step " + std::to_string(k + 1) + " (batch " +
                  folder.string() + "): " + e.what());
    }
    double seconds = secondsSince(start);
    bool last = k + 1 == o.steps;
    if (!o.checkpoint.empty() &&
        (last || (o.checkpointEvery > 0 && (k + 1) % o.checkpointEvery == 0)))
      session.save(o.checkpoint, dataPosition(o, batches.size(), next));
    if (session.rank() != 0)
      continue;
    std::printf("step %lld loss = %.9g\n", static_cast<long long>(k + 1), loss);
    std::fflush(stdout);
    steps.push_back({{"step", k + 1},
                     {"batch", folder.string()},
                     {"loss", std::isfinite(loss) ? nlohmann::json(loss)
                                                  : nlohmann::json(nullptr)},
                     {"wall_s", seconds}});
  }

  if (!o.out.empty())
    session.save_params(o.out);
  if (!o.shardsOut.empty())
    session.save_shards(o.shardsOut);
  if (!o.trace.empty() && session.rank() == 0) {
    nlohmann::json trace = {{"artifact", o.artifact},
                            {"backend", step::backendName(session.backend())},
                            {"setup_s", setupSeconds},
                            {"steps", steps},
                            {"total_s", secondsSince(t0)}};
    step::rt::writeFileAtomic(o.trace, trace.dump(2) + "\n", "--trace");
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
  app.add_option("--inputs", o.inputs,
                 "folder with <name>.npy per input, or numbered batch "
                 "folders 0000/, 0001/, ... (used in order, cycling)")
      ->required();
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
  app.add_option("--trace", o.trace, "write per-step wall times as JSON");
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

  try {
    return run(o);
  } catch (const std::exception &e) {
    std::cerr << "step-run: error: " << e.what() << "\n";
  }
  // One failing rank must not leave the others in a collective.
  step::rt::abortWorld(1);
  return 1;
}
