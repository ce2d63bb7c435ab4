//===- stepc.cpp - The StepJIT compiler driver ----------------------------===//
//
//   stepc MODEL.mlir --train [--optimizer=adamw,lr=3e-4,wd=0.1] [--clip=1.0]
//         [--schedule=cosine,warmup=100,total=1000] [--grad-accum=K]
//         [--amp=bf16|fp16] [--amp-keep-f32=OPS] [--loss-scale=...]
//         [--emit=artifact|mlir] -o OUT [--report=FILE.json] [--no-fuse]
//         [--dump-kernels=DIR] [--dot=FILE.dot] [--remat=none|auto|max |
//         --remat-budget=BYTES]
//         [--offload=none|auto|all[,link=B/s,...]] [--offload-optimizer]
//         [--shard=dp|zero1|zero2|zero3|tp:T[,bucket=BYTES][,prefetch=0|1]
//          --world-size=N]
//         [--guard-finite] [--no-attention-stats] [--no-layer-norm-stats]
//         [--no-donate]
//         [--gelu-epilogues] [--bgrad-epilogues] [--attention-saved-ds]
//         [--attention-atomic-dq]
//
// Reads a model (func.func @forward, DESIGN.md section 3), runs the training
// pipeline (compiler/pipeline/Train.h) and writes @train_step: as MLIR, or
// as a .step artifact (docs/artifact.md) after step-memory-plan. The default
// --emit follows the output's extension (.mlir: mlir, else artifact).
// step-fuse runs last unless --no-fuse; the report lists its fusion groups.
// Without --train, @forward is compiled as it is. Output and report are
// written atomically and together (both or neither); on any error nothing
// is written and the exit code is 1 (CLI11's own codes for malformed flags:
// docs/errors.md).
//
//===----------------------------------------------------------------------===//

#ifdef STEP_HAVE_CODEGEN
#include "compiler/codegen/ArtifactKernels.h"
#endif
#include "compiler/jit/Jit.h"
#include "compiler/pipeline/PlanBuilder.h"
#include "compiler/pipeline/Train.h"
#include "dialects/step/StepOps.h"
#include "passes/Passes.h"
#include "runtime/Npy.h"
#include "runtime/Profile.h"
#include "tools/Diagnostics.h"
#include "tools/Validators.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Transforms/ViewOpGraph.h"
#include "llvm/Support/SourceMgr.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <unistd.h>

namespace {
struct Options {
  std::string input, output, emit, report;
  bool train = false, guardFinite = false;
  std::string optimizer = "adamw", schedule = "constant";
  double clip = 0;
  int64_t gradAccum = 1;
  std::string arch = "sm_80,sm_90";
  bool noKernels = false, noFuse = false, noAttentionStats = false,
       noLayerNormStats = false;
  bool noDonate = false, geluEpilogues = false, attentionSavedDs = false;
  bool bgradEpilogues = false, attentionAtomicDq = false;
  std::string amp, ampKeepF32, lossScale = "auto";
  std::string dumpKernels;
  std::string dot; ///< --dot=FILE.dot
  std::string buckets; ///< --buckets=T:128,256,...
  std::string remat, rematBudget;
  std::string offload;
  bool offloadOptimizer = false;
  std::string shard;
  int64_t worldSize = 1;
};

/// The compiled function as a Graphviz graph, by MLIR's op-graph printer
/// (-view-op-graph): a node per op, data-flow edges, each step.fusion's
/// body a cluster, so fusion groups show as boxes around their ops.
/// Attributes are left out (a constant's would print its data).
std::string dotText(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  std::unique_ptr<mlir::Pass> print = mlir::createPrintOpGraphPass(os);
  auto optionError = [](const llvm::Twine &message) {
    throw step::rt::Error("--dot: " + message.str());
    return mlir::failure();
  };
  if (mlir::failed(print->initializeOptions(
          "print-attrs=false max-label-len=60", optionError)))
    throw step::rt::Error("--dot: the graph printer's options");
  mlir::PassManager pm(module.getContext());
  pm.addPass(std::move(print));
  if (mlir::failed(pm.run(module)))
    throw step::rt::Error("--dot: the graph printer failed");
  os.flush();
  return text;
}

std::string moduleText(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

nlohmann::json reportJson(const Options &o,
                          const std::vector<step::PassRecord> &records,
                          double seconds,
                          const nlohmann::json &fusions = nullptr,
                          const nlohmann::json &activations = nullptr,
                          const nlohmann::json &remat = nullptr,
                          const nlohmann::json &offload = nullptr,
                          const nlohmann::json &shard = nullptr,
                          const nlohmann::json &offloadOptimizer = nullptr) {
  nlohmann::json passes = nlohmann::json::array();
  for (const step::PassRecord &r : records) {
    nlohmann::json counts = nlohmann::json::object();
    for (const auto &[k, v] : r.counts)
      counts[k] = v;
    passes.push_back({{"pass", r.pass},
                      {"ops_before", r.opsBefore},
                      {"ops_after", r.opsAfter},
                      {"seconds", r.seconds},
                      {"counts", counts}});
  }
  return {{"input", o.input},
          {"output", o.output},
          {"train", o.train},
          {"optimizer", o.optimizer},
          {"schedule", o.schedule},
          {"clip", o.clip},
          {"grad_accum", o.gradAccum},
          {"compile_seconds", seconds},
          {"fuse", !o.noFuse},
          {"amp", o.amp},
          {"attention_stats", !o.noAttentionStats},
          {"layer_norm_stats", !o.noLayerNormStats},
          {"donate", !o.noDonate},
          {"gelu_epilogues", o.geluEpilogues},
          {"bgrad_epilogues", o.bgradEpilogues},
          {"attention_saved_ds", o.attentionSavedDs},
          {"attention_atomic_dq", o.attentionAtomicDq},
          {"loss_scale", o.lossScale},
          {"passes", passes},
          {"fusions", fusions},
          {"activations", activations},
          {"remat", remat},
          {"offload", offload},
          {"shard", shard},
          {"guard_finite", o.guardFinite},
          {"offload_optimizer", offloadOptimizer}};
}
/// Writes every (path, bytes) of `files` or none of them: each is staged
/// as PATH.tmp.<pid> beside its destination, and only when all are staged
/// are they renamed into place, so a report that cannot be written leaves
/// no output either. Throws rt::Error naming the path and the reason.
void writeTogether(
    const std::vector<std::pair<std::string, std::string>> &files) {
  std::vector<std::string> staged;
  auto fail = [&](const std::string &message, int err) {
    for (const std::string &tmp : staged)
      std::remove(tmp.c_str());
    return step::rt::Error(message + ": " + std::strerror(err));
  };
  for (const auto &[path, bytes] : files) {
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    std::FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f)
      throw fail(path + ": cannot create temporary file " + tmp, errno);
    staged.push_back(tmp);
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    int err = ok ? 0 : errno;
    if (std::fclose(f) != 0 && ok) {
      ok = false;
      err = errno;
    }
    if (!ok)
      throw fail(path + ": write failed", err);
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (std::rename(staged[i].c_str(), files[i].first.c_str()) != 0) {
      int err = errno;
      staged.erase(staged.begin(), staged.begin() + i);
      throw fail(files[i].first + ": cannot rename " + staged[0] +
                     " into place",
                 err);
    }
}

#ifdef STEP_HAVE_CODEGEN
/// Writes every distinct generated kernel of `f` as DIR/<name>.cu.
void dumpKernelSources(mlir::func::FuncOp f, const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw step::rt::Error("cannot create " + dir + ": " + ec.message());
  std::set<std::string> written;
  for (const auto &k : step::codegen::emitFunctionKernels(f))
    if (written.insert(k.name).second)
      step::rt::writeFileAtomic(dir + "/" + k.name + ".cu", k.source,
                                "stepc");
}
#endif
} // namespace

/// `--buckets=T:8,16,32` (or T:pow2, T:mult:64): the model compiled once
/// per bucket into one artifact (step::compileBuckets), which step::Session
/// and step-run pick from per batch.
int compileWithBuckets(const Options &o, const step::TrainOptions &train) {
  std::pair<std::string, step::BucketPolicy> option;
  try {
    option = step::parseBucketOption(o.buckets);
  } catch (const std::invalid_argument &e) {
    std::cerr << "stepc: --buckets: " << e.what() << "\n";
    return 1;
  }
  if (!o.train || o.emit != "artifact") {
    std::cerr << "stepc: --buckets needs --train and an artifact output\n";
    return 1;
  }
  std::ifstream in(o.input);
  if (!in) {
    std::cerr << "stepc: cannot read " << o.input << "\n";
    return 1;
  }
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  try {
    const auto &[symbol, policy] = option;
    nlohmann::json dynamic = step::dynamicSignature(text);
    if (dynamic.is_null() || !dynamic["symbols"].contains(symbol))
      throw step::rt::Error(
          "--buckets names symbol '" + symbol + "', which @forward does not "
          "declare in step.symbols (trace it with dyn(\"" + symbol +
          "\", max))");
    std::vector<std::map<std::string, int64_t>> sizes;
    for (int64_t size : policy.all(dynamic["symbols"][symbol].get<int64_t>()))
      sizes.push_back({{symbol, size}});
    step::rt::Artifact a =
        step::compileBuckets(text, train, sizes, !o.noKernels);
    // As a one-plan artifact's meta: each plan its own arena's size.
    a.meta.update({{"stepc_options", reportJson(o, {}, 0)},
                   {"arena_bytes", a.plan.arenaBytes}});
    for (step::rt::Artifact &b : a.buckets)
      b.meta["arena_bytes"] = b.plan.arenaBytes;
    step::rt::writeArtifact(o.output, a);
  } catch (const std::exception &e) {
    std::cerr << "stepc: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"StepJIT compiler: turns a model (@forward) into a training "
               "step."};
  app.add_option("model", o.input, "model .mlir file")->required();
  app.add_option("-o", o.output, "output file")->required();
  app.add_option("--emit", o.emit,
                 "artifact | mlir (default: mlir for a .mlir output, else "
                 "artifact)");
  app.add_flag("--train", o.train, "build @train_step");
  app.add_option("--optimizer", o.optimizer,
                 "sgd|adamw|lamb[,lr=..,beta1=..,beta2=..,eps=..,wd=..,"
                 "momentum=..,dampening=..,nesterov=true]")
      ->capture_default_str();
  app.add_option("--schedule", o.schedule,
                 "constant|cosine|linear[,warmup=N,total=N,min_ratio=R]")
      ->capture_default_str();
  app.add_option("--clip", o.clip, "clip gradients to this global L2 norm")
      ->check(step::tools::NonNegativeNumber);
  app.add_option("--grad-accum", o.gradAccum, "micro-batches per update")
      ->check(step::tools::PositiveInteger)
      ->capture_default_str();
  app.add_option("--report", o.report, "write what each pass did as JSON");
  app.add_option("--arch", o.arch,
                 "GPU architectures of the cubins (PTX for compute_80 too)")
      ->capture_default_str();
  app.add_flag("--no-kernels", o.noKernels,
               "artifact without CUDA kernels (runs on the CPU backend only)");
  app.add_option("--amp", o.amp,
                 "mixed precision: bf16 or fp16 (docs/amp.md); default off");
  app.add_option("--amp-keep-f32", o.ampKeepF32,
                 "ops always computed in f32 under --amp, e.g. "
                 "layer_norm,softmax");
  app.add_option("--loss-scale", o.lossScale,
                 "auto | none | dynamic[,init=S,growth=G,backoff=B,"
                 "interval=N] (auto: dynamic for fp16)")
      ->capture_default_str();
  app.add_option("--buckets", o.buckets,
                 "buckets of a symbolic dim, SYMBOL:SIZE,SIZE,... or "
                 "SYMBOL:pow2[:MIN] or SYMBOL:mult:N (one plan each in one "
                 "artifact; docs/dynamic-shapes.md)");
  app.add_option("--remat", o.remat,
                 "recompute activations: none | auto (elementwise only, no "
                 "extra matmuls) | max (lowest planned peak); docs/remat.md");
  app.add_option("--remat-budget", o.rematBudget,
                 "recompute until the planned arena fits BYTES (2GiB, 1.5e9, "
                 "...), or fail with the smallest peak found");
  app.add_option("--offload", o.offload,
                 "move saved activations to host memory: none | auto (copies "
                 "the cost model hides) | all, then ,link=B/s,flops=F/s,"
                 "hbm=B/s,max_exposed=X,min_bytes=N; docs/remat.md");
  app.add_flag("--offload-optimizer", o.offloadOptimizer,
               "ZeRO-Offload: params and optimizer state in host memory, the "
               "update on the host CPU; docs/distributed.md");
  app.add_option("--shard", o.shard,
                 "split the step across replicas: dp | zero1 | zero2 | zero3 "
                 "| tp:T (the model is traced for one replica's batch), then "
                 ",bucket=BYTES (gradient buckets, default 25MiB; 0: one "
                 "collective per gradient), for zero3 ,prefetch=0|1 (gather "
                 "a layer's params one layer ahead, default 1); "
                 "docs/distributed.md");
  app.add_option("--world-size", o.worldSize,
                 "replicas (ranks) a sharded step runs on")
      ->capture_default_str();
  app.add_flag("--guard-finite", o.guardFinite,
               "return guard.finite (loss and gradients finite); the "
               "runtime refuses a non-finite step and names the op that made "
               "the first NaN/Inf (docs/training.md)");
  app.add_flag("--no-fuse", o.noFuse,
               "skip step-fuse: one kernel per op (docs/fusion.md)");
  app.add_flag("--no-attention-stats", o.noAttentionStats,
               "skip step-attention-stats: attention's gradient recomputes "
               "its row statistics (docs/training.md; for A/B timing)");
  app.add_flag("--no-layer-norm-stats", o.noLayerNormStats,
               "skip step-layer-norm-stats: layer norm's gradient recomputes "
               "the row mean and rstd (docs/training.md; for A/B timing)");
  app.add_flag("--no-donate", o.noDonate,
               "plan the updated params and state apart from their buffers "
               "(copied there after each step) instead of in place "
               "(docs/artifact.md; for A/B timing)");
  app.add_flag("--gelu-epilogues", o.geluEpilogues,
               "fold a tanh GELU and its gradient into cuBLASLt epilogues "
               "(GELU_AUX_BIAS stores GELU's input; DGELU_BGRAD computes its "
               "gradient and the bias gradient); not yet run on a GPU, off by "
               "default (docs/fusion.md)");
  app.add_flag("--bgrad-epilogues", o.bgradEpilogues,
               "a bias gradient that no kernel computes on the way (GPT-2's "
               "q/k/v bias) joins its weight gradient's matmul as cuBLASLt's "
               "BGRADA/BGRADB epilogue (step-fuse-bias-grad); not yet run on "
               "a GPU, off by default (docs/fusion.md)");
  app.add_flag("--attention-saved-ds", o.attentionSavedDs,
               "attention's gradient stores dS once (its dk/dv launch) for a "
               "dq launch instead of computing the scores twice: 2 bytes a "
               "visible score of module memory; not yet timed on a GPU, off "
               "by default (docs/codegen.md)");
  app.add_flag("--attention-atomic-dq", o.attentionAtomicDq,
               "attention's gradient adds dq into an f32 accumulator with "
               "atomics from its dk/dv launch (FlashAttention-2's backward): "
               "4 bytes a dq element of module memory, dq's bits may differ "
               "between runs; before --attention-saved-ds; not yet timed on "
               "a GPU, off by default (docs/codegen.md)");
  app.add_option("--dot", o.dot,
                 "also write the compiled function as a Graphviz graph, "
                 "fusion groups as clusters (dot -Tsvg FILE.dot)");
  app.add_option("--dump-kernels", o.dumpKernels,
                 "write the generated CUDA sources, one <kernel>.cu each, to "
                 "this folder");
  CLI11_PARSE(app, argc, argv);

  if (o.emit.empty())
    o.emit = llvm::StringRef(o.output).ends_with(".mlir") ? "mlir" : "artifact";
  if (o.emit != "mlir" && o.emit != "artifact") {
    std::cerr << "stepc: --emit=" << o.emit
              << " is not a kind of output; expected artifact or mlir\n";
    return 1;
  }
  if (o.offloadOptimizer && !o.train) {
    std::cerr << "stepc: --offload-optimizer needs --train (it moves the "
                 "optimizer update to the host)\n";
    return 1;
  }
  if (o.offloadOptimizer && !o.rematBudget.empty()) {
    std::cerr << "stepc: --offload-optimizer and --remat-budget cannot be "
                 "combined: the budget bounds the arena before the params' "
                 "device copies move into it; give --remat=max or auto "
                 "instead\n";
    return 1;
  }
  if (o.guardFinite && !o.train) {
    std::cerr << "stepc: --guard-finite needs --train (it checks the "
                 "training step's loss and gradients)\n";
    return 1;
  }
  step::TrainOptions train;
  try {
    train.optimizer = step::OptimizerOptions::parse(o.optimizer);
    train.schedule = step::ScheduleOptions::parse(o.schedule);
    train.amp = step::AmpOptions::parse(o.amp, o.ampKeepF32, o.lossScale);
    train.remat = step::RematOptions::parse(o.remat, o.rematBudget);
    train.offload = step::OffloadOptions::parse(o.offload);
    train.shard = step::ShardOptions::parse(o.shard, o.worldSize);
  } catch (const std::invalid_argument &e) {
    std::cerr << "stepc: " << e.what() << "\n";
    return 1;
  }
  if (o.clip > 0)
    train.clipNorm = o.clip;
  train.gradAccum = o.gradAccum;
  train.fuse = !o.noFuse;
  train.geluEpilogues = o.geluEpilogues;
  train.bgradEpilogues = o.bgradEpilogues;
  train.attentionSavedDs = o.attentionSavedDs;
  train.attentionAtomicDq = o.attentionAtomicDq;
  train.attentionStats = !o.noAttentionStats;
  train.layerNormStats = !o.noLayerNormStats;
  train.guardFinite = o.guardFinite;
  train.offloadOptimizer = o.offloadOptimizer;

  if (!o.buckets.empty()) {
    if (!o.dot.empty()) {
      std::cerr << "stepc: error: --dot draws one plan; it does not combine "
                   "with --buckets (compile one bucket without --buckets "
                   "to draw it)\n";
      return 1;
    }
    if (!o.dumpKernels.empty()) {
      std::cerr << "stepc: error: --dump-kernels writes one plan's kernels; "
                   "it does not combine with --buckets (compile one bucket "
                   "without --buckets to dump its kernels)\n";
      return 1;
    }
    return compileWithBuckets(o, train);
  }

  mlir::DialectRegistry registry;
  registry.insert<mlir::step::StepDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  mlir::MLIRContext ctx(registry);
  // A pass's error points at the op in the user's file; the generic dump of
  // the whole op after it would bury that line.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  step::tools::ToolDiagnostics diagnostics(sourceMgr, &ctx);
  std::string error;
  auto buffer = mlir::openInputFile(o.input, &error);
  if (!buffer) {
    std::cerr << "stepc: " << error << "\n";
    return 1;
  }
  // The artifact records which source it came from (FNV-1a 64, hex).
  char sourceHash[17];
  std::snprintf(sourceHash, sizeof sourceHash, "%016llx",
                static_cast<unsigned long long>(step::rt::fnv1a64(
                    buffer->getBufferStart(), buffer->getBufferSize())));
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  auto start = std::chrono::steady_clock::now();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &ctx);
  if (!module || mlir::failed(mlir::verify(*module)))
    return 1;
  // DESIGN.md, model files: the model is @forward.
  if (!module->lookupSymbol<mlir::func::FuncOp>("forward")) {
    std::string found;
    for (auto f : module->getOps<mlir::func::FuncOp>())
      found += (found.empty() ? "@" : ", @") + f.getName().str();
    std::cerr << "stepc: error: " << o.input
              << " has no func.func @forward (the model to compile); found "
              << (found.empty() ? "no functions" : found) << "\n";
    return 1;
  }

  std::vector<step::PassRecord> records;
  if (o.train) {
    if (mlir::failed(step::buildTrainStep(*module, train, &records)))
      return 1;
  } else {
    mlir::PassManager pm(&ctx);
    pm.addPass(mlir::createCanonicalizerPass());
    if (!o.noFuse)
      mlir::step::addFusionPasses(pm, {o.geluEpilogues, o.bgradEpilogues});
    if (mlir::failed(pm.run(*module)))
      return 1;
  }
  std::string func = o.train ? "train_step" : "forward";
  auto funcOp = module->lookupSymbol<mlir::func::FuncOp>(func);
  if (!funcOp) {
    std::cerr << "stepc: error: the model has no @" << func << "\n";
    return 1;
  }
  nlohmann::json fusions = step::describeFusions(funcOp);
  nlohmann::json activations =
      o.train ? step::describeActivations(funcOp) : nlohmann::json();
  nlohmann::json remat = step::describeRemat(funcOp);
  nlohmann::json offload = step::describeOffload(funcOp);
  nlohmann::json shard = step::describeShard(funcOp);
  nlohmann::json offloadOptimizer = step::describeOffloadOptimizer(funcOp);
  if (!o.dumpKernels.empty()) {
#ifdef STEP_HAVE_CODEGEN
    try {
      dumpKernelSources(funcOp, o.dumpKernels);
    } catch (const std::exception &e) {
      std::cerr << "stepc: error: " << e.what() << "\n";
      return 1;
    }
#else
    std::cerr << "stepc: error: --dump-kernels needs a stepc built with the "
                 "CUDA toolkit (NVRTC)\n";
    return 1;
#endif
  }
  // Drawn before the memory plan annotates the ops (the graph has no
  // attributes anyway).
  std::string dot;
  if (!o.dot.empty()) {
    try {
      dot = dotText(*module);
    } catch (const std::exception &e) {
      std::cerr << "stepc: error: " << e.what() << "\n";
      return 1;
    }
  }
  step::rt::Artifact artifact;
  if (o.emit == "artifact") {
    try {
      artifact = step::planArtifact(*module, func, &records, !o.noDonate);
    } catch (const std::exception &e) {
      std::cerr << "stepc: error: " << e.what() << "\n";
      return 1;
    }
    // Merged: the plan builder's keys ("guard") stay.
    artifact.meta.update({{"stepc_options", reportJson(o, {}, 0)},
                          {"source_hash", sourceHash},
                          {"arena_bytes", artifact.plan.arenaBytes}});
    if (!shard.is_null())
      artifact.meta["shard"] = shard;
    if (!offloadOptimizer.is_null())
      artifact.meta["offload_optimizer"] = offloadOptimizer;
#ifdef STEP_HAVE_CODEGEN
    if (!o.noKernels) {
      step::codegen::NvrtcOptions nvrtc;
      nvrtc.archs.clear();
      std::stringstream archs(o.arch);
      for (std::string a; std::getline(archs, a, ',');)
        nvrtc.archs.push_back(a);
      step::codegen::CompileStats stats;
      double codegenStart = step::rt::steadySeconds();
      try {
        stats = step::codegen::addKernels(
            artifact, module->lookupSymbol<mlir::func::FuncOp>(func), nvrtc);
      } catch (const std::exception &e) {
        std::cerr << "stepc: error: " << e.what() << "\n";
        return 1;
      }
      step::PassRecord r;
      r.pass = "codegen";
      r.seconds = step::rt::steadySeconds() - codegenStart;
      r.counts["kernels"] =
          static_cast<int64_t>(artifact.meta["kernels"].size());
      r.counts["nvrtc_compiles"] = stats.compiled;
      r.counts["cache_hits"] = stats.cacheHits;
      records.push_back(r);
    }
#else
    artifact.meta["kernels"] = nlohmann::json::object();
    artifact.meta["note"] = "built without the CUDA toolkit: no kernels";
#endif
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  try {
    std::vector<std::pair<std::string, std::string>> files = {
        {o.output, o.emit == "artifact" ? step::rt::artifactBytes(artifact)
                                        : moduleText(*module)}};
    if (!o.dot.empty())
      files.emplace_back(o.dot, dot);
    if (!o.report.empty())
      files.emplace_back(o.report, reportJson(o, records, seconds, fusions,
                                              activations, remat, offload,
                                              shard, offloadOptimizer)
                                           .dump(2) +
                                       "\n");
    writeTogether(files);
  } catch (const std::exception &e) {
    std::cerr << "stepc: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
