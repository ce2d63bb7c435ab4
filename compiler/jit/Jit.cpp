//===- Jit.cpp - Just-in-time training steps in the host program ----------===//

#include "compiler/jit/Jit.h"

#ifdef STEP_HAVE_CODEGEN
#include "compiler/codegen/ArtifactKernels.h"
#endif
#include "compiler/pipeline/PlanBuilder.h"
#include "dialects/step/StepOps.h"
#include "passes/Passes.h"
#include "runtime/CacheFiles.h"
#include "runtime/Npy.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>

namespace step {
namespace fs = std::filesystem;

namespace {
/// Bumped whenever the compiler's output for the same input changes.
constexpr const char *kFormatTag = "stepjit-jit-3";

/// Every option that changes the compiled step, as text.
std::string optionsText(const TrainOptions &t, bool kernels) {
  const OptimizerOptions &o = t.optimizer;
  auto opt = [](const std::optional<double> &v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  std::string s = "opt=" + std::to_string(static_cast<int>(o.kind)) +
                  ",lr=" + opt(o.lr) + ",b1=" + opt(o.beta1) +
                  ",b2=" + opt(o.beta2) + ",eps=" + opt(o.eps) +
                  ",wd=" + opt(o.weightDecay) + ",m=" + opt(o.momentum) +
                  ",d=" + opt(o.dampening) + ",n=" + std::to_string(o.nesterov) +
                  ",wdv=" + std::to_string(o.decayVectors);
  s += ";sched=" + std::to_string(static_cast<int>(t.schedule.kind)) + "," +
       std::to_string(t.schedule.warmup) + "," +
       std::to_string(t.schedule.total) + "," +
       std::to_string(t.schedule.minRatio);
  s += ";clip=" + opt(t.clipNorm) + ";accum=" + std::to_string(t.gradAccum) +
       ";fuse=" + std::to_string(t.fuse) +
       ";astats=" + std::to_string(t.attentionStats) +
       ";lnstats=" + std::to_string(t.layerNormStats) +
       ";kernels=" + std::to_string(kernels) +
       ";guard=" + std::to_string(t.guardFinite);
  s += ";amp=" + t.amp.dtype + "," + t.amp.lossScale + "," +
       std::to_string(t.amp.initScale) + "," +
       std::to_string(t.amp.growthFactor) + "," +
       std::to_string(t.amp.backoffFactor) + "," +
       std::to_string(t.amp.growthInterval);
  for (const std::string &k : t.amp.keepF32)
    s += "," + k;
  // The memory passes and sharding change the plan too.
  s += ";remat=" + t.remat.mode + "," + std::to_string(t.remat.budget);
  const OffloadOptions &f = t.offload;
  s += ";offload=" + f.mode + "," + std::to_string(f.linkBandwidth) + "," +
       std::to_string(f.deviceFlops) + "," + std::to_string(f.memoryBandwidth) +
       "," + std::to_string(f.maxExposed) + "," + std::to_string(f.minBytes) +
       ";offload_optimizer=" + std::to_string(t.offloadOptimizer);
  const ShardOptions &h = t.shard;
  s += ";shard=" + h.mode + "," + std::to_string(h.worldSize) + "," +
       std::to_string(h.tp) + "," + std::to_string(h.bucketBytes) + "," +
       std::to_string(h.prefetch);
  for (const auto &[symbol, size] : t.buckets)
    s += ";bucket=" + symbol + ":" + std::to_string(size);
  return s;
}

/// Artifacts compiled in this process, by key.
std::map<std::string, rt::Artifact> &memoryCache() {
  static std::map<std::string, rt::Artifact> cache;
  return cache;
}
std::mutex &memoryCacheMutex() {
  static std::mutex m;
  return m;
}
} // namespace

namespace {
/// A context with the dialects a model uses, collecting diagnostics.
struct ModelContext {
  mlir::MLIRContext ctx;
  std::string diags;
  mlir::ScopedDiagnosticHandler handler{&ctx, [this](mlir::Diagnostic &d) {
                                          diags += d.str() + "\n";
                                          return mlir::success();
                                        }};
  ModelContext() {
    ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  }
  mlir::OwningOpRef<mlir::ModuleOp> parse(const std::string &text) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (!module)
      throw rt::Error("the model does not parse:\n" + diags);
    return module;
  }
};
} // namespace

namespace {
/// The CUDA kernels of @`func` compiled into `artifact` (NVRTC, cached in
/// `kernelCacheDir`); nothing in a build without the CUDA toolkit.
void addKernelsIfBuilt(rt::Artifact &artifact, mlir::ModuleOp module,
                       const std::string &func,
                       const std::string &kernelCacheDir) {
#ifdef STEP_HAVE_CODEGEN
  codegen::NvrtcOptions nvrtc;
  nvrtc.cacheDir = kernelCacheDir;
  codegen::addKernels(artifact, module.lookupSymbol<mlir::func::FuncOp>(func),
                      nvrtc);
#else
  (void)artifact;
  (void)module;
  (void)func;
  (void)kernelCacheDir;
#endif
}
} // namespace

nlohmann::json dynamicSignature(const std::string &modelMlir) {
  ModelContext m;
  return dynamicSignature(*m.parse(modelMlir));
}

rt::Artifact compileModel(const std::string &modelMlir,
                          const TrainOptions &options, bool kernels,
                          const std::string &kernelCacheDir) {
  ModelContext m;
  auto module = m.parse(modelMlir);
  std::string &diags = m.diags;
  nlohmann::json dynamic = dynamicSignature(*module);
  if (mlir::failed(buildTrainStep(*module, options)))
    throw rt::Error("the training pipeline failed:\n" + diags);
  rt::Artifact artifact = planArtifact(*module, "train_step");
  nlohmann::json remat =
      describeRemat(module->lookupSymbol<mlir::func::FuncOp>("train_step"));
  if (!remat.is_null())
    artifact.meta["remat"] = remat;
  nlohmann::json offload =
      describeOffload(module->lookupSymbol<mlir::func::FuncOp>("train_step"));
  if (!offload.is_null())
    artifact.meta["offload"] = offload;
  nlohmann::json offloadOptimizer = describeOffloadOptimizer(
      module->lookupSymbol<mlir::func::FuncOp>("train_step"));
  if (!offloadOptimizer.is_null())
    artifact.meta["offload_optimizer"] = offloadOptimizer;
  nlohmann::json shard =
      describeShard(module->lookupSymbol<mlir::func::FuncOp>("train_step"));
  if (!shard.is_null())
    artifact.meta["shard"] = shard;
  if (!dynamic.is_null()) {
    nlohmann::json bucket = nlohmann::json::object();
    for (const auto &[symbol, max] : dynamic["symbols"].items())
      bucket[symbol] = options.buckets.count(symbol)
                           ? options.buckets.at(symbol)
                           : max.get<int64_t>();
    artifact.meta["dynamic"] = dynamic;
    artifact.meta["bucket"] = bucket;
  }
  if (kernels)
    addKernelsIfBuilt(artifact, *module, "train_step", kernelCacheDir);
  return artifact;
}

rt::Artifact compileForward(const std::string &modelMlir, bool fuse,
                            bool kernels, const std::string &kernelCacheDir) {
  ModelContext m;
  auto module = m.parse(modelMlir);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    throw rt::Error("the model has no func.func @forward");
  mlir::PassManager pm(&m.ctx);
  pm.addPass(mlir::createCanonicalizerPass());
  if (fuse)
    mlir::step::addFusionPasses(pm);
  if (mlir::failed(pm.run(*module)))
    throw rt::Error("compiling @forward failed:\n" + m.diags);
  rt::Artifact artifact = planArtifact(*module, "forward");
  if (kernels)
    addKernelsIfBuilt(artifact, *module, "forward", kernelCacheDir);
  return artifact;
}

nlohmann::json dynamicSignature(mlir::ModuleOp module) {
  auto f = module.lookupSymbol<mlir::func::FuncOp>("forward");
  auto symbols =
      f ? f->getAttrOfType<mlir::DictionaryAttr>("step.symbols") : nullptr;
  if (!symbols)
    return nullptr;
  nlohmann::json out = {{"symbols", nlohmann::json::object()},
                        {"inputs", nlohmann::json::object()}};
  for (mlir::NamedAttribute s : symbols)
    out["symbols"][s.getName().str()] =
        mlir::cast<mlir::IntegerAttr>(s.getValue()).getInt();
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto dims = f.getArgAttrOfType<mlir::ArrayAttr>(i, "step.dims");
    auto name = f.getArgAttrOfType<mlir::StringAttr>(i, "step.name");
    if (!dims || !name)
      continue;
    nlohmann::json list = nlohmann::json::array();
    for (mlir::Attribute d : dims)
      list.push_back(mlir::cast<mlir::StringAttr>(d).str());
    out["inputs"][name.str()] = list;
  }
  return out;
}

rt::Artifact compileBuckets(const std::string &modelMlir,
                            const TrainOptions &options,
                            std::vector<std::map<std::string, int64_t>> sizes,
                            bool kernels, const std::string &kernelCacheDir) {
  if (sizes.empty())
    sizes.emplace_back(); // every symbol at its maximum
  std::vector<rt::Artifact> built;
  for (const auto &bucket : sizes) {
    TrainOptions o = options;
    o.buckets = bucket;
    built.push_back(compileModel(modelMlir, o, kernels, kernelCacheDir));
  }
  // The largest bucket (by total size, symbols left out at their maximum)
  // is the artifact, the others nest in the order given.
  size_t largest = 0;
  int64_t largestSize = -1;
  for (size_t i = 0; i < built.size(); ++i) {
    int64_t n = 1;
    nlohmann::json bucket =
        built[i].meta.value("bucket", nlohmann::json::object());
    for (const auto &entry : bucket.items())
      n *= entry.value().get<int64_t>();
    if (n > largestSize) {
      largest = i;
      largestSize = n;
    }
  }
  std::swap(built[0], built[largest]);
  rt::Artifact out = std::move(built.front());
  if (built.size() > 1 && !out.meta.contains("dynamic"))
    throw rt::Error("buckets were given but the model has no symbolic dims "
                    "(trace them with dyn(\"T\", max))");
  for (size_t i = 1; i < built.size(); ++i)
    out.buckets.push_back(std::move(built[i]));
  return out;
}

Jit::Jit(ModelFn model, JitOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  if (options_.cacheDir.empty())
    options_.cacheDir = rt::defaultCacheDir();
}

Jit::~Jit() = default;
Jit::Jit(Jit &&) noexcept = default;

namespace {
/// "T=32,U=8" (a file-name-safe form when `safe`: "T32.U8").
std::string describe(const std::map<std::string, int64_t> &sizes, bool safe) {
  std::string s;
  for (const auto &[symbol, size] : sizes) {
    std::string name = symbol;
    if (safe)
      for (char &c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
          c = '_';
    s += (s.empty() ? "" : safe ? "." : ",") + name + (safe ? "" : "=") +
         std::to_string(size);
  }
  return s;
}
} // namespace

std::string Jit::artifactPath(const Sizes &sizes) const {
  std::string name = key_;
  if (!sizes.empty())
    name += "." + describe(sizes, /*safe=*/true);
  return (fs::path(options_.cacheDir) / "artifacts" / (name + ".step"))
      .string();
}

std::vector<std::string> Jit::buckets() const {
  std::vector<std::string> out;
  for (const Sizes &s : lru_)
    out.push_back(describe(s, /*safe=*/false));
  return out;
}

void Jit::ensureTraced() {
  if (traced_)
    return;
  trace::Graph g(options_.seed);
  model_(g);
  // With the host program's file:line per op, for runtime messages.
  std::string text = g.mlir(/*locations=*/true);
  nlohmann::json dynamic = dynamicSignature(text);
  std::string symbols;
  if (!dynamic.is_null())
    for (const auto &entry : dynamic["symbols"].items())
      symbols += (symbols.empty() ? "" : ", ") + entry.key();
  for (const auto &[symbol, policy] : options_.buckets)
    if (dynamic.is_null() || !dynamic["symbols"].contains(symbol))
      throw rt::Error("JitOptions::buckets names symbol '" + symbol +
                      "', which the model does not have (symbols: " +
                      (symbols.empty() ? "none" : symbols) + ")");
  std::string keyed = std::string(kFormatTag) + "\n" +
                      optionsText(options_.train, options_.kernels) + "\n" +
                      text;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(
                    rt::fnv1a64(keyed.data(), keyed.size())));
  key_ = hex;
  text_ = std::move(text);
  initial_ = g.initialParams();
  dynamic_ = std::move(dynamic);
  traced_ = true;
}

rt::Artifact Jit::loadOrCompile(const Sizes &sizes) {
  std::string path = artifactPath(sizes);
  std::string id = fs::path(path).filename().string();
  ++loads_;
  {
    std::lock_guard<std::mutex> lock(memoryCacheMutex());
    auto it = memoryCache().find(id);
    if (it != memoryCache().end()) {
      fromCache_ = true;
      return it->second;
    }
  }
  rt::Artifact artifact;
  bool found = false;
  if (fs::exists(path)) {
    try {
      artifact = rt::readArtifact(path);
      found = true;
    } catch (const rt::Error &e) {
      // A damaged cache entry is recompiled and replaced, not fatal.
      std::cerr << "stepjit: warning: ignoring the cached artifact: "
                << e.what() << "\n";
    }
  }
  fromCache_ = found;
  if (!found) {
    TrainOptions train = options_.train;
    train.buckets = sizes;
    artifact = compileModel(text_, train, options_.kernels,
                            (fs::path(options_.cacheDir) / "kernels").string());
    ++compiles_;
    fs::create_directories(fs::path(path).parent_path());
    rt::writeArtifact(path, artifact);
  }
  std::lock_guard<std::mutex> lock(memoryCacheMutex());
  memoryCache()[id] = artifact;
  return artifact;
}

Jit::Sizes
Jit::bucketOf(const std::map<std::string, rt::HostTensor> &batch) const {
  Sizes out;
  std::map<std::string, int64_t> lengths = Session::lengthsOf(dynamic_, batch);
  for (const auto &entry : dynamic_["symbols"].items()) {
    const std::string &symbol = entry.key();
    int64_t max = entry.value().get<int64_t>();
    auto length = lengths.find(symbol);
    auto policy = options_.buckets.find(symbol);
    try {
      out[symbol] = length == lengths.end()
                        ? max
                        : (policy == options_.buckets.end()
                               ? BucketPolicy()
                               : policy->second)
                              .round(length->second, max);
    } catch (const std::invalid_argument &e) {
      throw rt::Error("step: symbol " + symbol + ": " + e.what());
    }
  }
  return out;
}

void Jit::ensureBucket(const Sizes &sizes) {
  auto at = std::find(lru_.begin(), lru_.end(), sizes);
  if (session_ && at != lru_.end()) {
    std::rotate(lru_.begin(), at, at + 1);
    return;
  }
  rt::Artifact artifact = loadOrCompile(sizes);
  if (!session_) {
    auto session = std::make_unique<Session>(std::move(artifact),
                                             options_.session);
    for (const auto &[name, value] : initial_)
      session->set(name, value);
    session_ = std::move(session);
  } else {
    session_->addBucket(std::move(artifact));
  }
  lru_.insert(lru_.begin(), sizes);
  size_t cap = std::max<size_t>(1, options_.maxBuckets);
  while (lru_.size() > cap) {
    Sizes victim = lru_.back();
    lru_.pop_back();
    session_->dropBucket(victim);
    if (evictions_++ == 0)
      std::cerr << "stepjit: warning: more than " << cap
                << " buckets in use; dropped " << describe(victim, false)
                << " (least recently used), which reloads from the artifact "
                   "cache when used again. A coarser bucket policy "
                   "(JitOptions::buckets) or a larger JitOptions::maxBuckets "
                   "avoids this; later drops are counted by "
                   "Jit::evictions(), not reported.\n";
  }
}

void Jit::clearMemoryCache() {
  std::lock_guard<std::mutex> lock(memoryCacheMutex());
  memoryCache().clear();
}

Session &Jit::session() {
  ensureTraced();
  if (!session_) {
    // Before any step: the largest bucket (every symbol at its maximum).
    Sizes sizes;
    if (!dynamic_.is_null())
      for (const auto &entry : dynamic_["symbols"].items())
        sizes[entry.key()] = entry.value().get<int64_t>();
    ensureBucket(sizes);
    bucket_ = sizes;
  }
  return *session_;
}

double Jit::step(const std::map<std::string, rt::HostTensor> &batch) {
  ensureTraced();
  Sizes sizes = dynamic_.is_null() ? Sizes() : bucketOf(batch);
  ensureBucket(sizes);
  bucket_ = sizes;
  return session_->step(batch);
}

} // namespace step
