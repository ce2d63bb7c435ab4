//===- step-bench.cpp - Compile-time and step-time benchmark --------------===//
//
//   step-bench MODEL.mlir --params DIR --inputs DIR [--optimizer=...]
//              [--schedule=...] [--clip=C] [--grad-accum=K] [--steps N]
//              [--warmup W] [--backend=cpu|cuda] [--out FILE.json] [--no-fuse]
//              [--gelu-epilogues] [--bgrad-epilogues] [--attention-saved-ds]
//              [--attention-atomic-dq]
//              [--bucket=T:SIZE] [--remat=none|auto|max | --remat-budget=B]
//              [--offload=none|auto|all[,...]] [--offload-optimizer]
//   step-bench MODEL.mlir --remat-sweep=N [--amp=...] [--offload=...]
//              [--out FILE.json]
//
// Compiles the model's training step twice in this process, with its CUDA
// kernels when built with the CUDA toolkit (cold: the first compile, with a
// new, empty kernel cache; warm: again, in a new MLIR context, the kernels
// now in that cache — what a second process sees), then runs W untimed and N
// timed steps through the runtime (runtime/Session.h) and prints one JSON
// object: compile seconds cold and warm, step seconds (median, min, max over
// N), plan steps, kernel launches, the bytes a step's ops read and write
// (operands and results of every plan step: the traffic the plan implies),
// planned peak arena bytes (and without reuse), what step-remat did, the
// backend and the machine. A benchmark,
// not a test: medians of repeated runs are the figures to quote.
//
// --remat-sweep=N compiles only (no kernels, no steps, so it runs anywhere):
// without recomputation, with --remat=auto and max, and with N budgets evenly
// between their planned peaks, printing each plan's peak and recomputed
// FLOPs (the memory/FLOPs curve of docs/remat.md; tools/dev/plot-remat.py
// draws it).
//
//===----------------------------------------------------------------------===//

#include "compiler/jit/Jit.h"
#include "runtime/Npy.h"
#include "runtime/Profile.h"
#include "runtime/Session.h"
#include "tools/Validators.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::map<std::string, step::rt::HostTensor> readDir(const std::string &dir) {
  if (!fs::is_directory(dir))
    throw step::rt::Error("--inputs: '" + dir + "' is not a folder");
  std::map<std::string, step::rt::HostTensor> m;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".npy")
      m[e.path().stem().string()] = step::rt::readNpy(e.path().string());
  return m;
}
/// One compile of the sweep: the remat report plus the artifact's peak.
nlohmann::json sweepPoint(const std::string &text, step::TrainOptions options,
                          const std::string &mode, int64_t budget) {
  options.remat.mode = mode;
  options.remat.budget = budget;
  auto t0 = Clock::now();
  step::rt::Artifact a = step::compileModel(text, options, /*kernels=*/false);
  nlohmann::json r = a.meta.value("remat", nlohmann::json::object());
  r["budget"] = budget;
  r["planned_peak_bytes"] = a.plan.arenaBytes;
  r["host_bytes"] = a.plan.hostBytes;
  r["offload"] = a.meta.value("offload", nlohmann::json());
  r["compile_seconds"] = since(t0);
  return r;
}

int rematSweep(const std::string &model, const std::string &text,
               const step::TrainOptions &options, int64_t n,
               const std::string &out) {
  nlohmann::json none = sweepPoint(text, options, "none", 0);
  none["mode"] = "none";
  none["recomputed_flops"] = 0;
  nlohmann::json max = sweepPoint(text, options, "max", 0);
  int64_t high = none["planned_peak_bytes"], low = max["peak_after"];
  nlohmann::json points = nlohmann::json::array();
  points.push_back(none);
  points.push_back(sweepPoint(text, options, "auto", 0));
  for (int64_t i = 0; i < n; ++i) {
    int64_t budget = high - (high - low) * (i + 1) / (n + 1);
    points.push_back(sweepPoint(text, options, "budget", budget));
  }
  points.push_back(max);
  nlohmann::json j = {{"model", model},
                      {"amp", options.amp.dtype.empty() ? "off"
                                                        : options.amp.dtype},
                      {"peak_without_remat", high},
                      {"remat_sweep", points}};
  std::string dump = j.dump(2) + "\n";
  std::cout << dump;
  if (!out.empty())
    step::rt::writeFileAtomic(out, dump, "step-bench");
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  std::string model, params, inputs, out,
      optimizer = "adamw", schedule = "constant", backend = "auto";
  double clip = 0;
  int64_t gradAccum = 1, steps = 20, warmup = 3;
  CLI::App app{"Benchmarks compiling and running a model's training step; "
               "prints JSON."};
  app.add_option("model", model, "model .mlir file")->required();
  app.add_option("--params", params, "folder of <param>.npy");
  app.add_option("--inputs", inputs, "folder of <input>.npy (one batch)");
  app.add_option("--optimizer", optimizer, "as stepc")->capture_default_str();
  app.add_option("--schedule", schedule, "as stepc")->capture_default_str();
  app.add_option("--clip", clip, "as stepc");
  app.add_option("--grad-accum", gradAccum, "as stepc")
      ->check(step::tools::PositiveInteger);
  app.add_option("--steps", steps, "timed steps")
      ->check(step::tools::PositiveInteger)
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")
      ->capture_default_str();
  app.add_option("--backend", backend, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--out", out, "also write the JSON here");
  bool noFuse = false;
  app.add_flag("--no-fuse", noFuse, "compile without step-fuse (as stepc)");
  bool geluEpilogues = false;
  app.add_flag("--gelu-epilogues", geluEpilogues,
               "GELU and its gradient in cuBLASLt epilogues (as stepc)");
  bool bgradEpilogues = false;
  app.add_flag("--bgrad-epilogues", bgradEpilogues,
               "a lone bias gradient in its weight gradient's cuBLASLt call "
               "(as stepc)");
  bool attentionSavedDs = false;
  app.add_flag("--attention-saved-ds", attentionSavedDs,
               "attention's gradient stores dS for its dq launch (as stepc)");
  bool attentionAtomicDq = false;
  app.add_flag("--attention-atomic-dq", attentionAtomicDq,
               "attention's gradient adds dq with atomics (as stepc)");
  std::string amp;
  app.add_option("--amp", amp, "bf16 | fp16 (as stepc); default off");
  std::string bucket;
  app.add_option("--bucket", bucket,
                 "SYMBOL:SIZE, the bucket of a model with a symbolic dim "
                 "(default: its maximum); inputs of any valid length are "
                 "padded to it (docs/dynamic-shapes.md)");
  std::string remat, rematBudget;
  app.add_option("--remat", remat, "none | auto | max (as stepc)");
  app.add_option("--remat-budget", rematBudget, "BYTES (as stepc)");
  std::string offload;
  app.add_option("--offload", offload,
                 "none | auto | all[,link=B/s,flops=F/s,...] (as stepc; "
                 "with --remat-sweep, at every point)");
  bool offloadOptimizer = false;
  app.add_flag("--offload-optimizer", offloadOptimizer,
               "ZeRO-Offload: params and optimizer state in host memory, the "
               "update on the host (as stepc)");
  int64_t sweep = 0;
  app.add_option("--remat-sweep", sweep,
                 "compile only: N budgets between no recomputation and "
                 "--remat=max")
      ->check(step::tools::PositiveInteger);
  CLI11_PARSE(app, argc, argv);
  if (!sweep && (params.empty() || inputs.empty())) {
    std::cerr << "step-bench: --params and --inputs are required (except "
                 "with --remat-sweep)\n";
    return 1;
  }

  try {
    std::ifstream in(model);
    if (!in)
      throw step::rt::Error("cannot read " + model);
    std::stringstream text;
    text << in.rdbuf();
    step::TrainOptions options;
    options.optimizer = step::OptimizerOptions::parse(optimizer);
    options.schedule = step::ScheduleOptions::parse(schedule);
    if (clip > 0)
      options.clipNorm = clip;
    options.gradAccum = gradAccum;
    options.fuse = !noFuse;
    options.geluEpilogues = geluEpilogues;
    options.bgradEpilogues = bgradEpilogues;
    options.attentionSavedDs = attentionSavedDs;
    options.attentionAtomicDq = attentionAtomicDq;
    options.amp = step::AmpOptions::parse(amp, "", "auto");
    options.remat = step::RematOptions::parse(remat, rematBudget);
    options.offload = step::OffloadOptions::parse(offload);
    options.offloadOptimizer = offloadOptimizer;
    if (!bucket.empty()) {
      size_t colon = bucket.find(':');
      std::string size =
          colon == std::string::npos ? "" : bucket.substr(colon + 1);
      char *end = nullptr;
      long long n = std::strtoll(size.c_str(), &end, 10);
      if (colon == std::string::npos || colon == 0 || size.empty() || *end ||
          n < 1)
        throw step::rt::Error("--bucket=" + bucket +
                              " must be SYMBOL:SIZE with SIZE >= 1, e.g. "
                              "T:128");
      options.buckets[bucket.substr(0, colon)] = n;
    }

    if (sweep)
      return rematSweep(model, text.str(), options, sweep, out);

    std::string cache = (fs::temp_directory_path() /
                         ("stepjit-bench-cache-" + std::to_string(::getpid())))
                            .string();
    auto t0 = Clock::now();
    step::rt::Artifact artifact =
        step::compileModel(text.str(), options, /*kernels=*/true, cache);
    double cold = since(t0);
    t0 = Clock::now();
    artifact = step::compileModel(text.str(), options, /*kernels=*/true, cache);
    double warm = since(t0);
    fs::remove_all(cache);

    step::SessionOptions so;
    so.backend = step::backendFromName(backend);
    step::Session session(artifact, so);
    session.load_params(params);
    auto batch = readDir(inputs);
    for (int64_t i = 0; i < warmup; ++i)
      session.step(batch);
    std::vector<double> times;
    double loss = 0;
    for (int64_t i = 0; i < steps; ++i) {
      t0 = Clock::now();
      loss = session.step(batch);
      times.push_back(since(t0));
    }
    std::sort(times.begin(), times.end());
    // Launches on a GPU: a generated kernel or a cuBLASLt call per step
    // (a matmul fusion is one call with an epilogue), and each further
    // phase of a kernel (the manifest's `then`: attention_grad's dk/dv, a
    // row chain's column totals); views move nothing.
    int64_t launches = step::rt::launchCount(artifact.plan), fusions = 0;
    const nlohmann::json kernels =
        artifact.meta.value("kernels", nlohmann::json::object());
    for (const auto &s : artifact.plan.steps)
      if (!s.kernel.empty() && kernels.contains(s.kernel))
        launches += static_cast<int64_t>(
            kernels[s.kernel].value("then", nlohmann::json::array()).size());
    // What a step moves: every plan step's operand and result bytes (a
    // fusion's, not its body's; views move nothing), as the trace's ops.
    int64_t bytesRead = 0, bytesWritten = 0;
    for (const auto &s : artifact.plan.steps) {
      fusions += s.op == "step.fusion";
      step::rt::StepCost cost = step::rt::stepCost(artifact.plan, s);
      bytesRead += cost.bytesRead;
      bytesWritten += cost.bytesWritten;
    }
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    nlohmann::json j = {
        {"model", model},
        {"backend", step::backendName(session.backend())},
        {"compile_seconds", {{"cold", cold}, {"warm", warm}}},
        {"step_seconds",
         {{"median", times[times.size() / 2]},
          {"min", times.front()},
          {"max", times.back()},
          {"samples", times.size()}}},
        {"last_loss", loss},
        {"plan_steps", artifact.plan.steps.size()},
        {"distinct_kernels",
         artifact.meta.value("kernels", nlohmann::json::object()).size()},
        {"kernel_launches", launches},
        {"bytes_per_step", {{"read", bytesRead}, {"written", bytesWritten}}},
        {"fused", !noFuse},
        {"gelu_epilogues", geluEpilogues},
        {"bgrad_epilogues", bgradEpilogues},
        {"attention_saved_ds", attentionSavedDs},
        {"attention_atomic_dq", attentionAtomicDq},
        {"amp", amp.empty() ? "off" : amp},
        {"fusions", fusions},
        {"planned_peak_bytes", artifact.plan.arenaBytes},
        {"remat", artifact.meta.value("remat", nlohmann::json())},
        {"offload", artifact.meta.value("offload", nlohmann::json())},
        {"offload_optimizer",
         artifact.meta.value("offload_optimizer", nlohmann::json())},
        {"host_bytes", artifact.plan.hostBytes},
        {"machine",
         {{"host", host}, {"cores", std::thread::hardware_concurrency()}}}};
    std::string dump = j.dump(2) + "\n";
    std::cout << dump;
    if (!out.empty())
      step::rt::writeFileAtomic(out, dump, "step-bench");
  } catch (const std::exception &e) {
    std::cerr << "step-bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
