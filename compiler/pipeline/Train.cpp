//===- Train.cpp - The training pipeline and the interpreter trainer ------===//
//
// The pipeline of DESIGN.md section 4 up to the optimizer: step-pad-dynamic
// (before everything that needs static shapes), canonicalize, step-amp,
// step-autodiff, step-grad-accum (k > 1), step-optimizer, then the calls
// they build are inlined into one flat @train_step and everything else is
// dropped, canonicalized and CSE'd.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Train.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "passes/Activations.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace step {
using namespace mlir;
namespace ops = mlir::step;

//===----------------------------------------------------------------------===//
// Option parsing
//===----------------------------------------------------------------------===//

namespace {
/// Splits "kind,key=value,..." into the kind and the key/value pairs.
std::pair<std::string, std::vector<std::pair<std::string, std::string>>>
splitSpec(const std::string &spec, const std::string &what) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ',');)
    parts.push_back(part);
  if (parts.empty() || parts[0].empty() ||
      parts[0].find('=') != std::string::npos)
    throw std::invalid_argument(
        what + " '" + spec + "' must start with a kind, e.g. " +
        (what == "--optimizer" ? "adamw,lr=3e-4" : "cosine,warmup=100"));
  std::vector<std::pair<std::string, std::string>> kv;
  for (size_t i = 1; i < parts.size(); ++i) {
    size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument(what + ": '" + parts[i] +
                                  "' is not key=value");
    kv.emplace_back(parts[i].substr(0, eq), parts[i].substr(eq + 1));
  }
  return {parts[0], kv};
}

double toDouble(const std::string &what, const std::string &key,
                const std::string &value) {
  try {
    size_t used = 0;
    double v = std::stod(value, &used);
    if (used == value.size())
      return v;
  } catch (const std::exception &) {
  }
  throw std::invalid_argument(what + ": " + key + "=" + value +
                              " is not a number");
}

int64_t toCount(const std::string &what, const std::string &key,
                const std::string &value) {
  double v = toDouble(what, key, value);
  if (v < 0 || v != static_cast<double>(static_cast<int64_t>(v)))
    throw std::invalid_argument(what + ": " + key + "=" + value +
                                " must be a non-negative integer");
  return static_cast<int64_t>(v);
}
/// A byte count: digits with an optional K/M/G/T (x1000) or KiB/MiB/GiB/TiB
/// (x1024) suffix (2GiB, 1.5e9, 25MiB); positive.
double parseBytes(const std::string &what, const std::string &text) {
  static const std::pair<const char *, double> units[] = {
      {"KiB", 1024.0},       {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024}, {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"K", 1e3},  {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1}};
  std::string number = text;
  double scale = 1;
  for (const auto &[suffix, factor] : units) {
    llvm::StringRef ref(text);
    if (ref.ends_with(suffix) && ref.size() > std::strlen(suffix)) {
      number = text.substr(0, text.size() - std::strlen(suffix));
      scale = factor;
      break;
    }
  }
  double v = toDouble(what, "bytes", number) * scale;
  if (!(v >= 1) || v > 9e18)
    throw std::invalid_argument(what + ": " + text +
                                " is not a positive byte count (e.g. "
                                "2GiB, 1.5e9)");
  return v;
}
} // namespace

OptimizerOptions OptimizerOptions::parse(const std::string &spec) {
  const std::string what = "--optimizer";
  auto [kind, kv] = splitSpec(spec, what);
  OptimizerOptions o;
  if (kind == "sgd")
    o.kind = Kind::Sgd;
  else if (kind == "adamw")
    o.kind = Kind::Adamw;
  else if (kind == "lamb")
    o.kind = Kind::Lamb;
  else
    throw std::invalid_argument(what + ": unknown optimizer '" + kind +
                                "', expected sgd, adamw or lamb");
  for (auto &[key, value] : kv) {
    if (key == "nesterov" || key == "wd_vectors") {
      if (value != "true" && value != "false" && value != "1" && value != "0")
        throw std::invalid_argument(what + ": " + key + "=" + value +
                                    " must be true or false");
      (key == "nesterov" ? o.nesterov : o.decayVectors) =
          value == "true" || value == "1";
      continue;
    }
    double v = toDouble(what, key, value);
    if (key == "lr")
      o.lr = v;
    else if (key == "beta1")
      o.beta1 = v;
    else if (key == "beta2")
      o.beta2 = v;
    else if (key == "eps")
      o.eps = v;
    else if (key == "wd" || key == "weight_decay")
      o.weightDecay = v;
    else if (key == "momentum")
      o.momentum = v;
    else if (key == "dampening")
      o.dampening = v;
    else
      throw std::invalid_argument(
          what + ": unknown key '" + key +
          "', expected lr, beta1, beta2, eps, wd, momentum, dampening, "
          "nesterov or wd_vectors");
  }
  return o;
}

ScheduleOptions ScheduleOptions::parse(const std::string &spec) {
  const std::string what = "--schedule";
  auto [kind, kv] = splitSpec(spec, what);
  ScheduleOptions s;
  if (kind == "constant")
    s.kind = Kind::Constant;
  else if (kind == "cosine")
    s.kind = Kind::Cosine;
  else if (kind == "linear")
    s.kind = Kind::Linear;
  else
    throw std::invalid_argument(what + ": unknown schedule '" + kind +
                                "', expected constant, cosine or linear");
  for (auto &[key, value] : kv) {
    if (key == "warmup")
      s.warmup = toCount(what, key, value);
    else if (key == "total")
      s.total = toCount(what, key, value);
    else if (key == "min_ratio")
      s.minRatio = toDouble(what, key, value);
    else
      throw std::invalid_argument(what + ": unknown key '" + key +
                                  "', expected warmup, total or min_ratio");
  }
  if (s.kind != Kind::Constant && s.total <= s.warmup)
    throw std::invalid_argument(what + ": " + kind + " needs total (" +
                                std::to_string(s.total) + ") > warmup (" +
                                std::to_string(s.warmup) + ")");
  return s;
}

AmpOptions AmpOptions::parse(const std::string &dtype,
                             const std::string &keep,
                             const std::string &lossScale) {
  AmpOptions a;
  if (!dtype.empty() && dtype != "bf16" && dtype != "fp16")
    throw std::invalid_argument("--amp: unknown type '" + dtype +
                                "', expected bf16 or fp16");
  a.dtype = dtype;
  std::stringstream names(keep);
  for (std::string name; std::getline(names, name, ',');)
    if (!name.empty())
      a.keepF32.push_back(name);
  const std::string what = "--loss-scale";
  auto [kind, kv] = splitSpec(lossScale.empty() ? "auto" : lossScale, what);
  if (kind != "auto" && kind != "none" && kind != "dynamic")
    throw std::invalid_argument(what + ": unknown kind '" + kind +
                                "', expected auto, none or dynamic");
  a.lossScale = kind;
  for (auto &[key, value] : kv) {
    if (key == "init")
      a.initScale = toDouble(what, key, value);
    else if (key == "growth")
      a.growthFactor = toDouble(what, key, value);
    else if (key == "backoff")
      a.backoffFactor = toDouble(what, key, value);
    else if (key == "interval")
      a.growthInterval = toCount(what, key, value);
    else
      throw std::invalid_argument(
          what + ": unknown key '" + key +
          "', expected init, growth, backoff or interval");
  }
  return a;
}

RematOptions RematOptions::parse(const std::string &mode,
                                 const std::string &budget) {
  RematOptions r;
  if (mode != "" && mode != "none" && mode != "auto" && mode != "max")
    throw std::invalid_argument("--remat: unknown mode '" + mode +
                                "', expected none, auto or max");
  r.mode = mode.empty() ? "none" : mode;
  if (budget.empty())
    return r;
  if (r.mode != "none")
    throw std::invalid_argument("--remat=" + r.mode +
                                " and --remat-budget exclude each other: a "
                                "budget is its own mode");
  double v = parseBytes("--remat-budget", budget);
  r.mode = "budget";
  r.budget = static_cast<int64_t>(v);
  return r;
}

OffloadOptions OffloadOptions::parse(const std::string &spec) {
  OffloadOptions o;
  const std::string what = "--offload";
  auto [mode, kv] = splitSpec(spec.empty() ? "none" : spec, what);
  if (mode != "none" && mode != "auto" && mode != "all")
    throw std::invalid_argument(what + ": unknown mode '" + mode +
                                "', expected none, auto or all");
  o.mode = mode;
  for (auto &[key, value] : kv) {
    double *target = key == "link"          ? &o.linkBandwidth
                     : key == "flops"       ? &o.deviceFlops
                     : key == "hbm"         ? &o.memoryBandwidth
                     : key == "max_exposed" ? &o.maxExposed
                                            : nullptr;
    if (key == "min_bytes")
      o.minBytes = toCount(what, key, value);
    else if (!target)
      throw std::invalid_argument(what + ": unknown key '" + key +
                                  "', expected link, flops, hbm, "
                                  "max_exposed or min_bytes");
    else
      *target = toDouble(what, key, value);
    if (target && (*target < 0 || (*target == 0 && key != "max_exposed")))
      throw std::invalid_argument(what + ": " + key + " = " + value +
                                  " must be positive");
  }
  return o;
}

ShardOptions ShardOptions::parse(const std::string &spec, int64_t worldSize) {
  ShardOptions o;
  auto [mode, kv] = splitSpec(spec.empty() ? "none" : spec, "--shard");
  for (auto &[key, value] : kv) {
    if (key == "prefetch") {
      if (mode != "zero3")
        throw std::invalid_argument("--shard: prefetch applies to zero3 "
                                    "only (params gathered before use), not "
                                    "to " + mode);
      if (value != "0" && value != "1")
        throw std::invalid_argument("--shard: prefetch = " + value +
                                    " must be 0 or 1");
      o.prefetch = value == "1";
      continue;
    }
    if (key != "bucket")
      throw std::invalid_argument("--shard: unknown key '" + key +
                                  "', expected bucket or prefetch");
    o.bucketBytes = value == "0" ? 0
                                 : static_cast<int64_t>(
                                       parseBytes("--shard: bucket", value));
  }
  o.mode = mode;
  if (mode.rfind("tp:", 0) == 0) {
    o.mode = "tp";
    std::string t = mode.substr(3);
    if (t.empty() || t.size() > 6 ||
        t.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(t) < 1)
      throw std::invalid_argument("--shard: '" + mode +
                                  "' must be tp:T with T >= 1 ranks per "
                                  "tensor-parallel group");
    o.tp = std::stoll(t);
  }
  if (o.mode != "none" && o.mode != "dp" && o.mode != "zero1" &&
      o.mode != "zero2" && o.mode != "zero3" && o.mode != "tp")
    throw std::invalid_argument("--shard: unknown mode '" + mode +
                                "', expected dp, zero1, zero2, zero3 or "
                                "tp:T");
  if (worldSize < 1)
    throw std::invalid_argument("--world-size: " + std::to_string(worldSize) +
                                " must be >= 1");
  if (o.mode == "none" && worldSize != 1)
    throw std::invalid_argument("--world-size=" + std::to_string(worldSize) +
                                " needs --shard=dp|zero1|zero2|zero3|tp:T");
  if (o.mode == "tp" && worldSize % o.tp != 0)
    throw std::invalid_argument(
        "--shard=tp:" + std::to_string(o.tp) + ": --world-size=" +
        std::to_string(worldSize) + " must be a multiple of " +
        std::to_string(o.tp) + " (world-size / T data-parallel groups)");
  o.worldSize = worldSize;
  return o;
}

double learningRate(const TrainOptions &options, int64_t s) {
  const ScheduleOptions &sc = options.schedule;
  double lr = options.optimizer.lr.value_or(1e-3);
  auto sd = static_cast<double>(s);
  if (s < sc.warmup)
    return lr * (sd + 1) / static_cast<double>(sc.warmup);
  if (sc.kind == ScheduleOptions::Kind::Constant)
    return lr;
  double span = static_cast<double>(std::max<int64_t>(1, sc.total - sc.warmup));
  double p = std::min(1.0, (sd - static_cast<double>(sc.warmup)) / span);
  double shape = sc.kind == ScheduleOptions::Kind::Cosine
                     ? 0.5 * (1 + std::cos(M_PI * p))
                     : 1 - p;
  return lr * (sc.minRatio + (1 - sc.minRatio) * shape);
}

//===----------------------------------------------------------------------===//
// The pipeline
//===----------------------------------------------------------------------===//

namespace {
int64_t countOps(Operation *root) {
  int64_t n = 0;
  root->walk([&](Operation *op) {
    if (!isa<ModuleOp, func::FuncOp, func::ReturnOp>(op))
      ++n;
  });
  return n;
}

/// Pass-specific counts read off the IR a pass produced.
void countWhatChanged(PassRecord &r, ModuleOp module) {
  if (r.pass == "step-pad-dynamic") {
    if (auto f = module.lookupSymbol<func::FuncOp>("forward"))
      if (auto buckets = f->getAttrOfType<DictionaryAttr>("step.buckets"))
        for (NamedAttribute b : buckets)
          r.counts["bucket." + b.getName().str()] =
              cast<IntegerAttr>(b.getValue()).getInt();
  } else if (r.pass == "step-autodiff") {
    if (auto f = module.lookupSymbol<func::FuncOp>("forward_backward"))
      for (unsigned i = 0; i < f.getNumResults(); ++i)
        if (auto kind = f.getResultAttrOfType<StringAttr>(i, "step.kind");
            kind && kind.getValue() == "grad")
          ++r.counts["gradients"];
  } else if (r.pass == "step-grad-accum") {
    module.walk([&](func::CallOp call) {
      if (call.getCallee() == "forward_backward_micro")
        ++r.counts["micro_batches"];
    });
  } else if (r.pass == "step-optimizer") {
    module.walk([&](Operation *op) {
      if (isa<ops::SgdUpdateOp, ops::AdamwUpdateOp, ops::LambUpdateOp>(op))
        ++r.counts["param_updates"];
    });
    if (auto f = module.lookupSymbol<func::FuncOp>("train_step"))
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (auto kind = f.getArgAttrOfType<StringAttr>(i, "step.kind");
            kind && kind.getValue() == "state")
          ++r.counts["state_tensors"];
  } else if (r.pass == "step-remat") {
    if (auto f = module.lookupSymbol<func::FuncOp>("train_step"))
      if (auto d = f->getAttrOfType<DictionaryAttr>("step.remat"))
        for (const char *key : {"recomputed_ops", "peak_before", "peak_after"})
          if (auto v = d.getAs<IntegerAttr>(key))
            r.counts[key] = v.getInt();
  } else if (r.pass == "step-offload") {
    if (auto f = module.lookupSymbol<func::FuncOp>("train_step"))
      if (auto d = f->getAttrOfType<DictionaryAttr>("step.offload"))
        for (const char *key : {"offloaded", "offloaded_bytes", "peak_before",
                                "peak_after"})
          if (auto v = d.getAs<IntegerAttr>(key))
            r.counts[key] = v.getInt();
  } else if (r.pass == "step-shard") {
    if (auto f = module.lookupSymbol<func::FuncOp>("train_step")) {
      f.walk([&](Operation *op) {
        if (isa<ops::AllReduceOp, ops::ReduceScatterOp, ops::AllGatherOp>(op))
          ++r.counts[op->getName().stripDialect().str()];
      });
      if (auto d = f->getAttrOfType<DictionaryAttr>("step.shard"))
        if (auto v = d.getAs<IntegerAttr>("world_size"))
          r.counts["world_size"] = v.getInt();
    }
  } else if (r.pass == "step-fuse") {
    if (auto f = module.lookupSymbol<func::FuncOp>("train_step")) {
      r.counts["top_level_ops"] = static_cast<int64_t>(
          f.getBody().front().getOperations().size());
      for (auto fusion : f.getOps<ops::FusionOp>()) {
        ++r.counts["fusions"];
        ++r.counts["fusions_" + fusion.getKind().str()];
      }
    }
  }
}

/// Records ops before/after and what every pass it sees produced.
struct ReportInstrumentation : PassInstrumentation {
  explicit ReportInstrumentation(std::vector<PassRecord> &records)
      : records(records) {}
  // Only passes on the module are recorded: the inliner runs a nested
  // canonicalizer on each function, which is part of "inline".
  void runBeforePass(Pass *pass, Operation *op) override {
    if (!isa<ModuleOp>(op))
      return;
    PassRecord r;
    r.pass = pass->getArgument().str();
    r.opsBefore = countOps(op);
    records.push_back(r);
  }
  void runAfterPass(Pass *, Operation *op) override {
    if (auto module = dyn_cast<ModuleOp>(op)) {
      PassRecord &r = records.back();
      r.opsAfter = countOps(op);
      countWhatChanged(r, module);
    }
  }
  std::vector<PassRecord> &records;
};

} // namespace

LogicalResult buildTrainStep(ModuleOp module, const TrainOptions &options,
                             std::vector<PassRecord> *report) {
  MLIRContext *ctx = module.getContext();
  DialectRegistry registry;
  func::registerInlinerExtension(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadDialect<ops::StepDialect, func::FuncDialect>();

  PassManager pm(ctx);
  pm.enableVerifier(true);
  // Symbolic dims first: every later pass (the VJP rules above all) needs
  // static shapes. A static model passes through unchanged.
  std::vector<std::string> sizes;
  for (const auto &[symbol, size] : options.buckets)
    sizes.push_back(symbol + "=" + std::to_string(size));
  ops::PadDynamicOptions pad;
  pad.sizes = sizes; // copied by createPadDynamic
  pm.addPass(ops::createPadDynamic(pad));
  pm.addPass(createCanonicalizerPass());
  if (options.shard.mode == "tp") {
    ops::TensorParallelOptions tp;
    tp.tpSize = options.shard.tp;
    tp.worldSize = options.shard.worldSize;
    pm.addPass(ops::createTensorParallel(tp));
  }
  if (!options.amp.dtype.empty()) {
    const AmpOptions &a = options.amp;
    ops::AmpOptions amp;
    amp.dtype = a.dtype;
    amp.keepF32 = a.keepF32;
    amp.lossScale = a.lossScale;
    amp.initScale = a.initScale;
    amp.growthFactor = a.growthFactor;
    amp.backoffFactor = a.backoffFactor;
    amp.growthInterval = a.growthInterval;
    pm.addPass(ops::createAmp(amp));
  }
  pm.addPass(ops::createAutodiff());
  if (options.gradAccum != 1) {
    ops::GradAccumOptions accum;
    accum.k = options.gradAccum;
    pm.addPass(ops::createGradAccum(accum));
  }
  const OptimizerOptions &o = options.optimizer;
  const ScheduleOptions &s = options.schedule;
  mlir::step::OptimizerOptions opt;
  opt.optimizer = o.kind == OptimizerOptions::Kind::Sgd     ? "sgd"
                  : o.kind == OptimizerOptions::Kind::Adamw ? "adamw"
                                                            : "lamb";
  // Unset values stay negative: the pass picks the optimizer's default.
  opt.lr = o.lr.value_or(1e-3);
  opt.beta1 = o.beta1.value_or(-1);
  opt.beta2 = o.beta2.value_or(-1);
  opt.eps = o.eps.value_or(-1);
  opt.weightDecay = o.weightDecay.value_or(-1);
  opt.momentum = o.momentum.value_or(0);
  opt.dampening = o.dampening.value_or(0);
  opt.nesterov = o.nesterov;
  opt.decayVectors = o.decayVectors;
  opt.clip = options.clipNorm.value_or(0);
  opt.guardFinite = options.guardFinite;
  opt.schedule = s.kind == ScheduleOptions::Kind::Constant ? "constant"
                 : s.kind == ScheduleOptions::Kind::Cosine ? "cosine"
                                                           : "linear";
  opt.warmup = s.warmup;
  opt.total = s.total;
  opt.minRatio = s.minRatio;
  pm.addPass(ops::createOptimizer(opt));
  if (options.shard.mode != "none") {
    ops::ShardOptions shard;
    shard.mode = options.shard.mode == "tp" ? "dp" : options.shard.mode;
    shard.tp = options.shard.tp;
    shard.worldSize = options.shard.worldSize;
    shard.bucketBytes = options.shard.bucketBytes;
    shard.prefetch = options.shard.prefetch;
    pm.addPass(ops::createShard(shard));
  }
  pm.addPass(createInlinerPass());
  if (report)
    pm.addInstrumentation(std::make_unique<ReportInstrumentation>(*report));
  if (failed(pm.run(module)))
    return failure();

  // Keep only @train_step, then clean up what inlining exposed.
  for (auto f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (f.getName() != "train_step")
      f.erase();
  PassManager cleanup(ctx);
  cleanup.addPass(createCanonicalizerPass());
  cleanup.addPass(createCSEPass());
  // Last: canonicalization would fold the broadcasts back into splats.
  cleanup.addPass(ops::createSplatBroadcast());
  if (report)
    cleanup.addInstrumentation(
        std::make_unique<ReportInstrumentation>(*report));
  if (failed(cleanup.run(module)))
    return failure();
  bool hints = false;
  module.walk([&](Operation *op) {
    hints = hints || op->hasAttr("step.checkpoint");
  });
  const std::string &mode = options.remat.mode;
  bool offload = options.offload.mode != "none";
  // The memory passes and step-fuse in one of two orders:
  //  - offloadFirst: free recomputation (hints, the min-cut's elementwise
  //    ops), then offloading what the copy streams hide, then the segment
  //    search (budget), which pays FLOPs, for what is left;
  //  - otherwise step-remat in its mode, then step-offload on what it
  //    kept (also max: recomputed segments make no reloads, so this order
  //    reaches the lower peak, docs/remat.md).
  auto memoryPasses = [&](bool offloadFirst) {
    auto pm = std::make_unique<PassManager>(ctx);
    auto addRemat = [&](const std::string &m) {
      ops::RematOptions remat;
      remat.mode = m;
      remat.budget = m == "budget" ? options.remat.budget : 0;
      remat.fuse = options.fuse;
      pm->addPass(ops::createRemat(remat));
    };
    if (offloadFirst)
      addRemat("auto");
    else if (mode != "none" || hints)
      addRemat(mode);
    if (offload) {
      ops::OffloadOptions o;
      o.mode = options.offload.mode;
      o.linkBandwidth = options.offload.linkBandwidth;
      o.deviceFlops = options.offload.deviceFlops;
      o.memoryBandwidth = options.offload.memoryBandwidth;
      o.maxExposed = options.offload.maxExposed;
      o.minBytes = options.offload.minBytes;
      o.fuse = options.fuse;
      pm->addPass(ops::createOffload(o));
    }
    if (offloadFirst)
      addRemat(mode);
    if (options.fuse)
      pm->addPass(ops::createFuse());
    if (report)
      pm->addInstrumentation(
          std::make_unique<ReportInstrumentation>(*report));
    return pm;
  };
  if (offload && mode == "budget") {
    // Try offloading first on a copy, silently; a budget that order cannot
    // meet (reloads can keep a value the search would drop) falls back to
    // recomputation first.
    OwningOpRef<ModuleOp> attempt = module.clone();
    size_t records = report ? report->size() : 0;
    LogicalResult done = failure();
    {
      ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
      done = memoryPasses(true)->run(*attempt);
    }
    if (succeeded(done)) {
      module.getBody()->getOperations().clear();
      module.getBody()->getOperations().splice(
          module.getBody()->end(), attempt->getBody()->getOperations());
      return success();
    }
    if (report)
      report->resize(records);
  }
  return memoryPasses(false)->run(module);
}

nlohmann::json describeFusions(func::FuncOp func) {
  nlohmann::json groups = nlohmann::json::array();
  int64_t read = 0, written = 0, fused = 0;
  for (auto fusion : func.getOps<ops::FusionOp>()) {
    nlohmann::json names = nlohmann::json::array();
    for (Operation &op : fusion.getBlock().without_terminator())
      names.push_back(op.getName().stripDialect().str());
    int64_t in = 0, out = 0;
    for (Value v : fusion.getInputs())
      in += ops::tensorBytes(v.getType());
    for (Value v : fusion.getResults())
      out += ops::tensorBytes(v.getType());
    read += in;
    written += out;
    fused += static_cast<int64_t>(names.size());
    groups.push_back({{"kind", fusion.getKind().str()},
                      {"ops", names},
                      {"bytes_read", in},
                      {"bytes_written", out}});
  }
  return {{"count", groups.size()},
          {"fused_ops", fused},
          {"bytes_read", read},
          {"bytes_written", written},
          {"groups", groups}};
}

nlohmann::json describeActivations(func::FuncOp func, size_t largest) {
  ops::SavedActivations a = ops::savedActivations(func);
  std::vector<Value> bySize(a.saved.begin(), a.saved.end());
  // Largest first; ties in program order (stable).
  std::stable_sort(bySize.begin(), bySize.end(), [](Value x, Value y) {
    return ops::tensorBytes(x.getType()) > ops::tensorBytes(y.getType());
  });
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < bySize.size() && i < largest; ++i) {
    std::string type;
    llvm::raw_string_ostream os(type);
    os << bySize[i].getType();
    top.push_back({{"op", bySize[i].getDefiningOp()->getName().stripDialect().str()},
                   {"type", type},
                   {"bytes", ops::tensorBytes(bySize[i].getType())}});
  }
  return {{"saved", a.saved.size()}, {"saved_bytes", a.bytes}, {"largest", top}};
}

namespace {
/// A pass's summary dictionary as JSON: integers, floats and strings.
nlohmann::json dictionaryToJson(DictionaryAttr d) {
  nlohmann::json out = nlohmann::json::object();
  for (NamedAttribute a : d) {
    if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
      out[a.getName().str()] = i.getInt();
    else if (auto f = dyn_cast<FloatAttr>(a.getValue()))
      out[a.getName().str()] = f.getValueAsDouble();
    else if (auto s = dyn_cast<StringAttr>(a.getValue()))
      out[a.getName().str()] = s.getValue().str();
  }
  return out;
}
} // namespace

nlohmann::json describeOffload(func::FuncOp func) {
  auto d = func->getAttrOfType<DictionaryAttr>("step.offload");
  return d ? dictionaryToJson(d) : nlohmann::json();
}

nlohmann::json describeShard(func::FuncOp func) {
  auto d = func->getAttrOfType<DictionaryAttr>("step.shard");
  if (!d)
    return nullptr;
  nlohmann::json out = dictionaryToJson(d);
  nlohmann::json sharded = nlohmann::json::object();
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto shape =
            func.getArgAttrOfType<DenseI64ArrayAttr>(i, "step.full_shape"))
      sharded[argumentName(func, i)] = std::vector<int64_t>(
          shape.asArrayRef().begin(), shape.asArrayRef().end());
  out["sharded"] = sharded;
  // Tensor parallelism: per split param or slot its dim, groups and full
  // shape (the runtime's tp_split, docs/artifact.md).
  nlohmann::json split = nlohmann::json::object();
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto s = func.getArgAttrOfType<DenseI64ArrayAttr>(i, "step.tp_split")) {
      ArrayRef<int64_t> v = s.asArrayRef();
      split[argumentName(func, i)] = {
          {"dim", v[0]},
          {"groups", v[1]},
          {"shape", std::vector<int64_t>(v.begin() + 2, v.end())}};
    }
  if (!split.empty())
    out["tp_split"] = split;
  return out;
}

nlohmann::json describeRemat(func::FuncOp func) {
  auto d = func->getAttrOfType<DictionaryAttr>("step.remat");
  if (!d)
    return nullptr;
  nlohmann::json out = dictionaryToJson(d);
  int64_t stepFlops = out.value("step_flops", int64_t(0));
  out["flop_overhead"] =
      stepFlops > 0 ? static_cast<double>(out.value("recomputed_flops", 0.0)) /
                          static_cast<double>(stepFlops)
                    : 0.0;
  int64_t before = out.value("peak_before", int64_t(0));
  out["peak_ratio"] =
      before > 0 ? static_cast<double>(out.value("peak_after", int64_t(0))) /
                       static_cast<double>(before)
                 : 1.0;
  return out;
}

//===----------------------------------------------------------------------===//
// Trainer
//===----------------------------------------------------------------------===//

namespace {
/// Collects the diagnostics of a scope into a string (for exceptions).
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *ctx)
      : handler(ctx, [this](Diagnostic &d) {
          llvm::raw_string_ostream os(text);
          os << d.getLocation() << ": " << d << "\n";
          return success();
        }) {}
  std::string text;

private:
  ScopedDiagnosticHandler handler;
};

rt::HostTensor zerosOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return rt::HostTensor(*toDType(tensor.getElementType()),
                        rt::Shape(tensor.getShape()));
}
} // namespace

Trainer::Trainer(const std::string &modelMlir, const TrainOptions &options,
                 std::map<std::string, rt::HostTensor> params)
    : context_(std::make_unique<MLIRContext>()), state_(std::move(params)) {
  context_->loadDialect<ops::StepDialect, func::FuncDialect>();
  DiagnosticCollector diags(context_.get());
  module_ = parseSourceString<ModuleOp>(modelMlir, context_.get());
  if (!module_)
    throw rt::Error("the model does not parse:\n" + diags.text);
  if (failed(buildTrainStep(*module_, options)))
    throw rt::Error("building the train step failed:\n" + diags.text);
  auto step = module_->lookupSymbol<func::FuncOp>("train_step");
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto kind = step.getArgAttrOfType<StringAttr>(i, "step.kind");
    std::string name = argumentName(step, i);
    if (kind && kind.getValue() == "state" && !state_.count(name))
      state_[name] = zerosOf(step.getArgument(i).getType());
    if (kind && kind.getValue() == "param" && !state_.count(name))
      throw rt::Error("no initial value for param '" + name + "'");
  }
}

Trainer::~Trainer() = default;

double Trainer::step(const std::map<std::string, rt::HostTensor> &batch) {
  auto step = module_->lookupSymbol<func::FuncOp>("train_step");
  std::vector<rt::HostTensor> args;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    std::string name = argumentName(step, i);
    auto kind = step.getArgAttrOfType<StringAttr>(i, "step.kind");
    bool input = kind && kind.getValue() == "input";
    const auto &from = input ? batch : state_;
    auto it = from.find(name);
    if (it == from.end())
      throw rt::Error("train step: no value for " +
                      std::string(input ? "input" : "argument") + " '" + name +
                      "'");
    args.push_back(it->second);
  }
  DiagnosticCollector diags(context_.get());
  auto results = interpret(step, args);
  if (failed(results))
    throw rt::Error("train step failed:\n" + diags.text);
  for (unsigned r = 1; r < results->size(); ++r)
    state_[resultName(step, r)] = std::move((*results)[r]);
  return (*results)[0].getAsDouble(0);
}

std::string Trainer::trainStepMlir() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  ModuleOp module = module_.get();
  module.print(os);
  return text;
}

} // namespace step
