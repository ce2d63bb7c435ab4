//===- Nvrtc.cpp - NVRTC driver and on-disk kernel cache ------------------===//
//
// One job per (distinct source, target). Workers take jobs from an atomic
// counter; a job first looks in the cache, else runs NVRTC and stores the
// result (temporary file + rename). The first error stops the remaining
// jobs and is rethrown once every worker has joined.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Nvrtc.h"

#include "runtime/CacheFiles.h"
#include "runtime/Npy.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <nvrtc.h>

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
};
} // namespace

/// Runs NVRTC on one job; on failure saves source and log and throws.
static std::string compileOne(const KernelSource &ks, const std::string &target,
                              const std::string &include,
                              const fs::path &cacheDir,
                              const std::string &key) {
  nvrtcProgram prog;
  check(nvrtcCreateProgram(&prog, ks.source.c_str(), (ks.name + ".cu").c_str(),
                           0, nullptr, nullptr),
        "nvrtcCreateProgram");
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
    nvrtcDestroyProgram(&prog);
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
  nvrtcDestroyProgram(&prog);
  if (!cubin && !out.empty() && out.back() == '\0')
    out.pop_back(); // PTX comes NUL-terminated
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
  if (!options.ptxArch.empty())
    targets.push_back(options.ptxArch);
  // Identical sources (same op shape and attributes, same name) compile once.
  std::unordered_map<std::string, size_t> firstWithSource;
  std::vector<size_t> sourceOf(kernels.size());
  std::vector<Job> jobs;
  for (size_t k = 0; k < kernels.size(); ++k) {
    auto [it, fresh] = firstWithSource.emplace(kernels[k].source, k);
    sourceOf[k] = it->second;
    if (fresh)
      for (const std::string &t : targets)
        jobs.push_back({k, t, {}});
  }

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
        std::string key = cacheKey(ks.source, job.target);
        fs::path file =
            cacheDir / (key + (job.target.rfind("sm_", 0) == 0 ? ".cubin"
                                                               : ".ptx"));
        if (cacheOk && fs::exists(file)) {
          job.result = readFile(file);
          if (!job.result.empty()) {
            ++hits;
            continue;
          }
        }
        job.result = compileOne(ks, job.target, include, cacheDir, key);
        ++compiled;
        if (cacheOk) {
          try {
            rt::writeFileAtomic(file.string(), job.result, "kernel cache");
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
