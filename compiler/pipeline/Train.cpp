//===- Train.cpp - The training pipeline and the interpreter trainer ------===//
//
// The pipeline of DESIGN.md section 4 up to the optimizer: step-pad-dynamic
// (before everything that needs static shapes), canonicalize, step-amp,
// step-autodiff, step-grad-accum (k > 1), step-optimizer, then the calls
// they build are inlined into one flat @train_step and everything else is
// dropped, canonicalized and CSE'd. The options' parsing and the learning
// rate schedule are in TrainOptions.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Train.h"

#include "compiler/interpreter/Interpreter.h"
#include "dialects/step/StepOps.h"
#include "passes/Activations.h"
#include "passes/Passes.h"
#include "runtime/Profile.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cstring>

namespace step {
using namespace mlir;
namespace ops = mlir::step;

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
  } else if (r.pass == "step-offload-optimizer") {
    if (auto f = module.lookupSymbol<func::FuncOp>("train_step"))
      if (auto d = f->getAttrOfType<DictionaryAttr>("step.offload_optimizer"))
        for (const char *key : {"host_ops", "offloaded_bytes", "reloaded_bytes"})
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

/// Records ops before/after, seconds and what every pass it sees produced.
struct ReportInstrumentation : PassInstrumentation {
  explicit ReportInstrumentation(std::vector<PassRecord> &records)
      : records(records) {}
  // Only the pipeline's own passes on the module are recorded: the inliner
  // runs a nested canonicalizer on each function, which is part of
  // "inline", and step-shard runs an inliner of its own on the module,
  // which is part of "step-shard" (a pipeline run from inside a pass sees
  // the same instrumentation).
  void runBeforePass(Pass *pass, Operation *op) override {
    if (!isa<ModuleOp>(op) || depth++ > 0)
      return;
    PassRecord r;
    r.pass = pass->getArgument().str();
    r.opsBefore = countOps(op);
    records.push_back(r);
    start = rt::steadySeconds();
  }
  void runAfterPass(Pass *, Operation *op) override {
    auto module = dyn_cast<ModuleOp>(op);
    if (!module || --depth > 0)
      return;
    PassRecord &r = records.back();
    r.seconds = rt::steadySeconds() - start;
    r.opsAfter = countOps(op);
    countWhatChanged(r, module);
  }
  void runAfterPassFailed(Pass *, Operation *op) override {
    if (isa<ModuleOp>(op))
      --depth;
  }
  std::vector<PassRecord> &records;
  /// Module passes running now: the pipeline's and those nested in it.
  int depth = 0;
  double start = 0; ///< rt::steadySeconds() when the pass began
};

} // namespace

/// buildTrainStep's passes.
static LogicalResult runTrainPasses(ModuleOp module,
                                    const TrainOptions &options,
                                    std::vector<PassRecord> *report) {
  MLIRContext *ctx = module.getContext();
  DialectRegistry registry;
  func::registerInlinerExtension(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadDialect<ops::StepDialect, func::FuncDialect>();
  if (options.offloadOptimizer && options.remat.mode == "budget")
    return module.emitError(
        "offloading the optimizer cannot be combined with a remat budget: "
        "the budget bounds the arena before the params' device copies move "
        "into it");

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
  // Dropout masks keyed by the step counter, now that the forward's
  // dropouts are in @train_step beside opt.step.
  cleanup.addPass(ops::createDropoutOffset());
  cleanup.addPass(createCanonicalizerPass());
  cleanup.addPass(createCSEPass());
  // Attention's row statistics from the forward to its gradient, now that
  // CSE made their operands the same values.
  if (options.attentionStats)
    cleanup.addPass(ops::createAttentionStats());
  // Layer norm's mean and rstd likewise (the pass runs CSE itself).
  if (options.layerNormStats)
    cleanup.addPass(ops::createLayerNormStats());
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
      remat.geluEpilogues = options.geluEpilogues;
      remat.bgradEpilogues = options.bgradEpilogues;
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
      o.geluEpilogues = options.geluEpilogues;
      o.bgradEpilogues = options.bgradEpilogues;
      pm->addPass(ops::createOffload(o));
    }
    if (offloadFirst)
      addRemat(mode);
    if (options.fuse)
      ops::addFusionPasses(
          *pm, {options.geluEpilogues, options.bgradEpilogues});
    if (options.offloadOptimizer)
      pm->addPass(ops::createOffloadOptimizer());
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
    double start = rt::steadySeconds();
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
    if (report) {
      // The attempt's passes give way to one record of its time.
      report->resize(records);
      PassRecord r;
      r.pass = "offload-first-attempt";
      r.opsBefore = r.opsAfter = countOps(module);
      r.seconds = rt::steadySeconds() - start;
      report->push_back(r);
    }
  }
  return memoryPasses(false)->run(module);
}

LogicalResult buildTrainStep(ModuleOp module, const TrainOptions &options,
                             std::vector<PassRecord> *report) {
  if (failed(runTrainPasses(module, options, report)))
    return failure();
  // Read by the CUDA kernels' emitter only.
  for (auto [on, attr] : {std::pair{options.attentionSavedDs, ops::kSavedDsAttr},
                          {options.attentionAtomicDq, ops::kAtomicDqAttr}})
    if (on)
      module.walk([attr = attr](ops::AttentionGradOp g) {
        g->setAttr(attr, UnitAttr::get(g.getContext()));
      });
  return success();
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
  // Every top-level op that moves data (a fusion, a bare op, a matmul, a
  // collective, an offload copy; not a view, a constant or the return):
  // the step's memory traffic as its ops' operand and result bytes.
  int64_t kernels = 0, kernelRead = 0, kernelWritten = 0;
  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp, ops::ConstantOp, ops::ReshapeOp,
            ops::StopGradientOp>(op))
      continue;
    ++kernels;
    for (Value v : op.getOperands())
      kernelRead += ops::tensorBytes(v.getType());
    for (Value v : op.getResults())
      kernelWritten += ops::tensorBytes(v.getType());
  }
  return {{"count", groups.size()},
          {"fused_ops", fused},
          {"bytes_read", read},
          {"bytes_written", written},
          {"groups", groups},
          {"kernels",
           {{"count", kernels},
            {"bytes_read", kernelRead},
            {"bytes_written", kernelWritten}}}};
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

nlohmann::json describeOffloadOptimizer(func::FuncOp func) {
  auto d = func->getAttrOfType<DictionaryAttr>("step.offload_optimizer");
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
