//===- Nvrtc.cpp - NVRTC driver and on-disk kernel cache ------------------===//
//
// One job per (distinct source, NVRTC run). Workers take jobs from an
// atomic counter; a job first looks in the cache, else runs NVRTC and
// stores the results (temporary file + rename). The first error stops the
// remaining jobs and is rethrown once every worker has joined.
//
// The PTX of virtual architecture compute_NN comes from the sm_NN cubin's
// run when sm_NN is also asked for: NVRTC makes that cubin from the very
// PTX a compute_NN run returns (nvrtcGetPTX after an sm_80 compile gave
// the compute_80 run's bytes for all 32 distinct kernels of GPT-2 124M's
// step, NVRTC 13.0; `Nvrtc.PtxOfTheCubinsRunIsTheVirtualArchitectures`
// keeps checking it; a run that gives no PTX is followed by a compute_NN
// run of its own). One front end and NVVM run fewer a kernel: GPT-2 124M's
// cold compile on 2 cores went from 90 runs to 60.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Nvrtc.h"

#include "runtime/CacheFiles.h"
#include "runtime/Npy.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace fs = std::filesystem;

namespace step::codegen {

/// Options that change the generated code (and so belong in the cache key).
/// No multiply-add contraction: kernels round like the CPU reference.
static const char *const kCodeOptions[] = {"--std=c++17", "--fmad=false"};
static constexpr const char *kFormatTag = "stepjit-nvrtc-v1";

static void check(nvrtcResult r, const char *what) {
  if (r != NVRTC_SUCCESS)
    throw rt::Error(std::string("NVRTC: ") + what + " failed: " +
                    nvrtcGetErrorString(r));
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string cacheKey(const std::string &source, const std::string &target) {
  llvm::SHA256 h;
  auto field = [&](llvm::StringRef s) {
    h.update(s);
    h.update(llvm::StringRef("\0", 1));
  };
  field(kFormatTag);
  field(nvrtcVersionString());
  field(target);
  for (const char *o : kCodeOptions)
    field(o);
  field(source);
  return llvm::toHex(h.final(), /*LowerCase=*/true);
}

static std::string includeDir(const NvrtcOptions &options) {
  if (!options.includeDir.empty())
    return options.includeDir;
  if (const char *e = std::getenv("STEPJIT_CUDA_INCLUDE"); e && *e)
    return e;
  return STEP_CUDA_INCLUDE_DIR;
}

static std::string readFile(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
struct Job {
  size_t kernel;      // index of the first kernel with this source
  std::string target; // "sm_80" or "compute_80"
  std::string result;
  /// The virtual architecture ("compute_80") whose PTX this sm_ job's run
  /// also yields; empty if none.
  std::string ptxTarget;
  std::string ptx;
};
} // namespace

/// Runs NVRTC on one job: returns the cubin of an sm_ target (and sets
/// *ptx to the run's PTX when ptx is not null; left empty if NVRTC gives
/// none) or the PTX of a compute_ one; on failure saves source and log and
/// throws.
static std::string compileOne(const KernelSource &ks, const std::string &target,
                              const std::string &include,
                              const fs::path &cacheDir,
                              const std::string &key,
                              std::string *ptx = nullptr) {
  nvrtcProgram prog;
  check(nvrtcCreateProgram(&prog, ks.source.c_str(), (ks.name + ".cu").c_str(),
                           0, nullptr, nullptr),
        "nvrtcCreateProgram");
  // Destroyed on every way out, a throw included.
  struct Destroy {
    nvrtcProgram *p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::vector<std::string> opts = {"--gpu-architecture=" + target};
  for (const char *o : kCodeOptions)
    opts.push_back(o);
  opts.push_back("--include-path=" + include);
  if (fs::exists(fs::path(include) / "cccl")) // CUDA 13 keeps <nv/target> there
    opts.push_back("--include-path=" + (fs::path(include) / "cccl").string());
  std::vector<const char *> argv;
  for (const std::string &o : opts)
    argv.push_back(o.c_str());
  nvrtcResult r =
      nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t logSize = 0;
    nvrtcGetProgramLogSize(prog, &logSize);
    std::string log(logSize, '\0');
    if (logSize)
      nvrtcGetProgramLog(prog, log.data());
    std::error_code ec;
    fs::path dir = cacheDir / "errors";
    fs::create_directories(dir, ec);
    fs::path file = dir / (ks.name + "-" + target + "-" + key.substr(0, 16) +
                           ".cu");
    std::ofstream(file) << ks.source << "\n/* NVRTC " << nvrtcVersionString()
                        << " log for " << target << " (options:"
                        << [&] {
                             std::string s;
                             for (const std::string &o : opts)
                               s += " " + o;
                             return s;
                           }()
                        << "):\n"
                        << log << "*/\n";
    throw rt::Error("NVRTC could not compile kernel '" + ks.name + "' for " +
                    target + " (" + nvrtcGetErrorString(r) +
                    "); source and log saved to " + file.string() + "\n" +
                    log);
  }
  bool cubin = target.rfind("sm_", 0) == 0;
  size_t size = 0;
  check(cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size),
        "getting the output size");
  std::string out(size, '\0');
  check(cubin ? nvrtcGetCUBIN(prog, out.data()) : nvrtcGetPTX(prog, out.data()),
        "getting the output");
  auto trimPtx = [](std::string &text) {
    if (!text.empty() && text.back() == '\0')
      text.pop_back(); // PTX comes NUL-terminated
  };
  if (!cubin)
    trimPtx(out);
  if (cubin && ptx) {
    ptx->clear();
    size_t ptxSize = 0;
    if (nvrtcGetPTXSize(prog, &ptxSize) == NVRTC_SUCCESS && ptxSize > 1) {
      std::string text(ptxSize, '\0');
      if (nvrtcGetPTX(prog, text.data()) == NVRTC_SUCCESS) {
        trimPtx(text);
        *ptx = std::move(text);
      }
    }
  }
  return out;
}

std::vector<CompiledKernel>
compileKernels(const std::vector<KernelSource> &kernels,
               const NvrtcOptions &options, CompileStats *stats) {
  auto start = std::chrono::steady_clock::now();
  fs::path cacheDir =
      options.cacheDir.empty() ? rt::defaultCacheDir() : options.cacheDir;
  std::error_code ec;
  fs::create_directories(cacheDir, ec);
  bool cacheOk = !ec;
  std::string include = includeDir(options);

  std::vector<std::string> targets = options.archs;
  // The PTX rides on its real architecture's run when that is asked for.
  std::string ptxWith;
  const std::string &virt = options.ptxArch;
  if (virt.rfind("compute_", 0) == 0 &&
      llvm::is_contained(targets, "sm_" + virt.substr(8)))
    ptxWith = "sm_" + virt.substr(8);
  else if (!virt.empty())
    targets.push_back(virt);
  // Identical sources (same op shape and attributes, same name) compile once.
  std::unordered_map<std::string, size_t> firstWithSource;
  std::vector<size_t> sourceOf(kernels.size());
  std::vector<Job> jobs;
  for (size_t k = 0; k < kernels.size(); ++k) {
    auto [it, fresh] = firstWithSource.emplace(kernels[k].source, k);
    sourceOf[k] = it->second;
    if (fresh)
      for (const std::string &t : targets)
        jobs.push_back(
            {k, t, {}, t == ptxWith ? options.ptxArch : std::string(), {}});
  }

  // Longest first (source length standing for compile time), so that no
  // long job starts last while the other workers idle.
  std::stable_sort(jobs.begin(), jobs.end(), [&](const Job &a, const Job &b) {
    return kernels[a.kernel].source.size() > kernels[b.kernel].source.size();
  });

  std::atomic<size_t> next{0};
  std::atomic<int64_t> compiled{0}, hits{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex errorMutex;
  auto worker = [&] {
    for (size_t j; !failed && (j = next++) < jobs.size();) {
      Job &job = jobs[j];
      const KernelSource &ks = kernels[job.kernel];
      try {
        auto fileOf = [&](const std::string &key, const std::string &t) {
          return cacheDir /
                 (key + (t.rfind("sm_", 0) == 0 ? ".cubin" : ".ptx"));
        };
        auto cached = [&](const fs::path &file, std::string &into) {
          if (cacheOk && fs::exists(file))
            into = readFile(file);
          return !into.empty();
        };
        std::string key = cacheKey(ks.source, job.target);
        std::string ptxKey =
            job.ptxTarget.empty() ? "" : cacheKey(ks.source, job.ptxTarget);
        fs::path file = fileOf(key, job.target), ptxFile;
        if (!job.ptxTarget.empty())
          ptxFile = fileOf(ptxKey, job.ptxTarget);
        if (cached(file, job.result) &&
            (ptxFile.empty() || cached(ptxFile, job.ptx))) {
          ++hits;
          continue;
        }
        job.result = compileOne(ks, job.target, include, cacheDir, key,
                                ptxFile.empty() ? nullptr : &job.ptx);
        ++compiled;
        if (!ptxFile.empty() && job.ptx.empty()) {
          // No PTX from the cubin's run: the virtual architecture's own.
          job.ptx = compileOne(ks, job.ptxTarget, include, cacheDir, ptxKey);
          ++compiled;
        }
        if (cacheOk) {
          try {
            rt::writeFileAtomic(file.string(), job.result, "kernel cache");
            if (!ptxFile.empty())
              rt::writeFileAtomic(ptxFile.string(), job.ptx, "kernel cache");
          } catch (const rt::Error &) {
            // A read-only cache only costs recompilation.
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!error)
          error = std::current_exception();
        failed = true;
      }
    }
  };
  unsigned n = options.threads ? options.threads
                               : std::max(1u, std::thread::hardware_concurrency());
  n = static_cast<unsigned>(std::min<size_t>(n, std::max<size_t>(jobs.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  if (error)
    std::rethrow_exception(error);

  std::vector<CompiledKernel> out(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k)
    out[k].name = kernels[k].name;
  for (Job &job : jobs) {
    CompiledKernel &ck = out[job.kernel];
    if (job.target.rfind("sm_", 0) == 0)
      ck.cubin[job.target] = std::move(job.result);
    else
      ck.ptx = std::move(job.result);
    if (!job.ptxTarget.empty())
      ck.ptx = std::move(job.ptx);
  }
  for (size_t k = 0; k < kernels.size(); ++k)
    if (sourceOf[k] != k) {
      out[k].cubin = out[sourceOf[k]].cubin;
      out[k].ptx = out[sourceOf[k]].ptx;
    }
  if (stats) {
    stats->compiled = compiled;
    stats->cacheHits = hits;
    stats->seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  }
  return out;
}

} // namespace step::codegen
