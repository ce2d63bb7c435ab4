//===- Jit.cpp - Just-in-time training steps in the host program ----------===//

#include "compiler/jit/Jit.h"

#ifdef STEP_HAVE_CODEGEN
#include "compiler/codegen/ArtifactKernels.h"
#endif
#include "compiler/pipeline/PlanBuilder.h"
#include "dialects/step/StepOps.h"
#include "runtime/Npy.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>
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

std::string defaultRoot() {
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "stepjit").string();
  const char *home = std::getenv("HOME");
  return (fs::path(home && *home ? home : "/tmp") / ".cache" / "stepjit")
      .string();
}

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
       ";fuse=" + std::to_string(t.fuse) + ";kernels=" + std::to_string(kernels);
  s += ";amp=" + t.amp.dtype + "," + t.amp.lossScale + "," +
       std::to_string(t.amp.initScale) + "," +
       std::to_string(t.amp.growthFactor) + "," +
       std::to_string(t.amp.backoffFactor) + "," +
       std::to_string(t.amp.growthInterval);
  for (const std::string &k : t.amp.keepF32)
    s += "," + k;
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

rt::Artifact compileModel(const std::string &modelMlir,
                          const TrainOptions &options, bool kernels,
                          const std::string &kernelCacheDir) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::step::StepDialect, mlir::func::FuncDialect>();
  std::string diags;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    diags += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(modelMlir, &ctx);
  if (!module)
    throw rt::Error("the model does not parse:\n" + diags);
  nlohmann::json dynamic = dynamicSignature(*module);
  if (mlir::failed(buildTrainStep(*module, options)))
    throw rt::Error("the training pipeline failed:\n" + diags);
  rt::Artifact artifact = planArtifact(*module, "train_step");
  if (!dynamic.is_null()) {
    nlohmann::json bucket = nlohmann::json::object();
    for (const auto &[symbol, max] : dynamic["symbols"].items())
      bucket[symbol] = options.buckets.count(symbol)
                           ? options.buckets.at(symbol)
                           : max.get<int64_t>();
    artifact.meta["dynamic"] = dynamic;
    artifact.meta["bucket"] = bucket;
  }
#ifdef STEP_HAVE_CODEGEN
  if (kernels) {
    codegen::NvrtcOptions nvrtc;
    nvrtc.cacheDir = kernelCacheDir;
    codegen::addKernels(
        artifact, module->lookupSymbol<mlir::func::FuncOp>("train_step"),
        nvrtc);
  }
#else
  (void)kernels;
  (void)kernelCacheDir;
#endif
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
    options_.cacheDir = defaultRoot();
}

Jit::~Jit() = default;
Jit::Jit(Jit &&) noexcept = default;

std::string Jit::artifactPath() const {
  return (fs::path(options_.cacheDir) / "artifacts" / (key_ + ".step"))
      .string();
}

void Jit::ensureCompiled() {
  if (session_)
    return;
  trace::Graph g(options_.seed);
  model_(g);
  std::string text = g.mlir();
  std::string keyed = std::string(kFormatTag) + "\n" +
                      optionsText(options_.train, options_.kernels) + "\n" +
                      text;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(
                    rt::fnv1a64(keyed.data(), keyed.size())));
  key_ = hex;

  rt::Artifact artifact;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(memoryCacheMutex());
    auto it = memoryCache().find(key_);
    if (it != memoryCache().end()) {
      artifact = it->second;
      found = true;
    }
  }
  std::string path = artifactPath();
  if (!found && fs::exists(path)) {
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
    artifact = compileModel(text, options_.train, options_.kernels,
                            (fs::path(options_.cacheDir) / "kernels").string());
    fs::create_directories(fs::path(path).parent_path());
    rt::writeArtifact(path, artifact);
  }
  {
    std::lock_guard<std::mutex> lock(memoryCacheMutex());
    memoryCache()[key_] = artifact;
  }
  auto session = std::make_unique<Session>(std::move(artifact),
                                           options_.session);
  for (const auto &[name, value] : g.initialParams())
    session->set(name, value);
  session_ = std::move(session);
}

void Jit::clearMemoryCache() {
  std::lock_guard<std::mutex> lock(memoryCacheMutex());
  memoryCache().clear();
}

Session &Jit::session() {
  ensureCompiled();
  return *session_;
}

double Jit::step(const std::map<std::string, rt::HostTensor> &batch) {
  ensureCompiled();
  return session_->step(batch);
}

} // namespace step
