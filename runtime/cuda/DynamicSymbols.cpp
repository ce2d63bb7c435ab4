//===- DynamicSymbols.cpp - The CUDA driver and cuBLASLt via dlopen -------===//
//
// Libraries are opened lazily, once per process, and never unloaded: they
// are opened with RTLD_NODELETE, so a Library's dlclose only drops its
// reference. cuBLASLt and NCCL carry their own static C++ runtime, whose
// startup allocations would otherwise be lost (and reported as leaks) when
// the library left the process, and which cannot be re-initialized safely. Failure to open is not
// an error here: it is recorded as the reason the backend is unavailable, and
// Session turns it into a refusal when the user asked for CUDA.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DynamicSymbols.h"

#include "runtime/Tensor.h"

#include <dlfcn.h>

#include <mutex>

// Stringize after expansion, so cuMemAlloc names "cuMemAlloc_v2".
#define STEP_CUDA_STR2(x) #x
#define STEP_CUDA_STR(x) STEP_CUDA_STR2(x)

namespace step::rt::cuda {

Library::~Library() {
  if (handle_)
    dlclose(handle_);
}

bool Library::openFirst(const char *what,
                        const std::vector<std::string> &candidates,
                        std::string *reason) {
  std::string tried;
  for (const std::string &name : candidates) {
    dlerror();
    handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle_) {
      path_ = name;
      return true;
    }
    const char *err = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (err ? err : name);
  }
  *reason = std::string(what) + " could not be loaded (" +
            (tried.empty() ? std::string("no library names given") : tried) +
            ")";
  return false;
}

void *Library::symbol(const char *name, std::string *reason) {
  dlerror();
  void *p = dlsym(handle_, name);
  if (!p)
    *reason = path_ + " lacks the symbol " + name +
              " (a driver or library older than the CUDA " +
              std::to_string(CUDA_VERSION / 1000) + "." +
              std::to_string(CUDA_VERSION % 1000 / 10) +
              " headers this runtime was built with?)";
  return p;
}

#define STEP_CUDA_RESOLVE(name)                                                \
  if (!t->resolve(STEP_CUDA_STR(name), &t->name, reason))                      \
    return nullptr;

std::unique_ptr<DriverSymbols>
DriverSymbols::load(const std::vector<std::string> &candidates,
                    std::string *reason) {
  auto t = std::make_unique<DriverSymbols>();
  if (!t->openFirst("the CUDA driver library", candidates, reason))
    return nullptr;
  STEP_CUDA_DRIVER_SYMBOLS(STEP_CUDA_RESOLVE)
  // Optional: only profiled runs need it (its _v2 name is from CUDA 12.8).
  std::string ignored;
  t->resolve(STEP_CUDA_STR(cuEventElapsedTime), &t->cuEventElapsedTime,
             &ignored);
  return t;
}

std::unique_ptr<CublasLtSymbols>
CublasLtSymbols::load(const std::vector<std::string> &candidates,
                      std::string *reason) {
  auto t = std::make_unique<CublasLtSymbols>();
  if (!t->openFirst("cuBLASLt", candidates, reason))
    return nullptr;
  STEP_CUBLASLT_SYMBOLS(STEP_CUDA_RESOLVE)
  return t;
}

#undef STEP_CUDA_RESOLVE

std::vector<std::string> defaultDriverNames() {
  return {"libcuda.so.1", "libcuda.so"};
}

std::vector<std::string> defaultCublasLtNames() {
  return {"libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12"};
}

std::string errorString(const DriverSymbols &d, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (d.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = "unknown CUresult";
  if (d.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
    text = "no description";
  return std::string(name) + " (" + text + ", code " + std::to_string(r) + ")";
}

void check(const DriverSymbols &d, CUresult r, const std::string &what) {
  if (r != CUDA_SUCCESS)
    throw Error("CUDA error in " + what + ": " + errorString(d, r));
}

void check(const CublasLtSymbols &lt, cublasStatus_t s,
           const std::string &what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    const char *text = lt.cublasLtGetStatusString(s);
    throw Error("cuBLASLt error in " + what + ": " +
                (text ? text : "unknown status") + " (" + std::to_string(s) +
                ")");
  }
}

std::string allocationError(CUresult r, const std::string &errorText,
                            const std::string &what, int64_t bytes,
                            int64_t freeBytes, int64_t totalBytes) {
  if (r != CUDA_ERROR_OUT_OF_MEMORY)
    return "CUDA error in " + what + ": " + errorText;
  std::string have =
      freeBytes < 0 ? "the device's free memory is unknown"
                    : "the device has " + std::to_string(freeBytes) + " of " +
                          std::to_string(totalBytes) + " bytes free";
  return "out of device memory: " + what + " needs " + std::to_string(bytes) +
         " bytes and " + have +
         "; plan a smaller peak with stepc --remat=max or "
         "--remat-budget=BYTES, --offload=auto, a smaller batch, or "
         "--shard=zero3 over more GPUs (docs/remat.md)";
}

Availability probeDevices(const DriverSymbols &d) {
  Availability a;
  CUresult r = d.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    a.reason = "no CUDA driver: " + d.path() +
               " is the toolkit's stub library, not a driver";
    return a;
  }
  if (r != CUDA_SUCCESS) {
    a.reason = "the CUDA driver failed to initialize: " + errorString(d, r);
    return a;
  }
  int count = 0;
  r = d.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    a.reason = "cuDeviceGetCount failed: " + errorString(d, r);
    return a;
  }
  if (count <= 0) {
    a.reason = "no CUDA device is present";
    return a;
  }
  a.ok = true;
  return a;
}

namespace {
struct Global {
  std::once_flag driverOnce, ltOnce;
  std::unique_ptr<DriverSymbols> driver;
  Availability availability;
  std::unique_ptr<CublasLtSymbols> lt;
  std::string ltReason;
};

Global &global() {
  // Leaked on purpose: executors destroyed during static destruction may
  // still call into the libraries.
  static Global *g = new Global;
  return *g;
}

void loadDriver() {
  Global &g = global();
  std::call_once(g.driverOnce, [&g] {
    std::string reason;
    g.driver = DriverSymbols::load(defaultDriverNames(), &reason);
    if (!g.driver) {
      g.availability.reason = "no CUDA driver: " + reason;
      return;
    }
    g.availability = probeDevices(*g.driver);
  });
}
} // namespace

const DriverSymbols *driver() {
  loadDriver();
  return global().driver.get();
}

Availability available() {
  loadDriver();
  return global().availability;
}

const CublasLtSymbols *cublasLt() {
  Global &g = global();
  std::call_once(g.ltOnce, [&g] {
    g.lt = CublasLtSymbols::load(defaultCublasLtNames(), &g.ltReason);
  });
  return g.lt.get();
}

std::string cublasLtReason() {
  cublasLt();
  return global().ltReason;
}

} // namespace step::rt::cuda
