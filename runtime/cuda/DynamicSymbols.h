//===- DynamicSymbols.h - The CUDA driver and cuBLASLt via dlopen -*- C++ -*-===//
//
// The runtime never links libcuda or cuBLASLt: a machine without a GPU (CI,
// the CPU backend's users) must load and run the runtime. Each library is
// opened with dlopen and its functions are resolved into one symbol table, as
// IREE's hal/drivers/cuda/cuda_dynamic_symbols.h. The toolkit headers supply
// the types only.
//
// Symbol names are resolved after macro expansion: <cuda.h> maps cuMemAlloc
// to cuMemAlloc_v2, cuGraphInstantiate to cuGraphInstantiateWithFlags, ...,
// so the table asks the driver for exactly the ABI the headers describe, and
// calls spelled `syms.cuMemAlloc(...)` reach that entry point.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CUDA_DYNAMICSYMBOLS_H
#define STEP_RUNTIME_CUDA_DYNAMICSYMBOLS_H

#include <cublasLt.h>
#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

namespace step::rt::cuda {

/// Driver API functions the backend calls.
#define STEP_CUDA_DRIVER_SYMBOLS(X)                                            \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncGetAttribute)                                                        \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuLaunchHostFunc)                                                          \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemHostAlloc)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemGetInfo)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiate)                                                        \
  X(cuGraphLaunch)                                                             \
  X(cuGraphDestroy)                                                            \
  X(cuGraphExecDestroy)

/// cuBLASLt functions for one (batched) matmul.
#define STEP_CUBLASLT_SYMBOLS(X)                                               \
  X(cublasLtGetVersion)                                                        \
  X(cublasLtGetStatusString)                                                   \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmulAlgoCheck)                                                   \
  X(cublasLtMatmul)

#define STEP_CUDA_DECLARE_SYMBOL(name) decltype(&::name) name = nullptr;

/// An open library, never unloaded (RTLD_NODELETE): destroying it drops
/// its reference.
class Library {
public:
  Library() = default;
  Library(const Library &) = delete;
  Library &operator=(const Library &) = delete;
  virtual ~Library();
  /// The name dlopen accepted.
  const std::string &path() const { return path_; }

protected:
  /// Opens the first of `candidates` dlopen accepts. False, with *reason
  /// naming `what` and every dlerror, when none opens.
  bool openFirst(const char *what, const std::vector<std::string> &candidates,
                 std::string *reason);
  /// Stores symbol `name` in *slot; false, with *reason, when it is missing.
  template <typename F>
  bool resolve(const char *name, F *slot, std::string *reason) {
    void *p = symbol(name, reason);
    *slot = reinterpret_cast<F>(p);
    return p != nullptr;
  }

private:
  void *symbol(const char *name, std::string *reason);

  void *handle_ = nullptr;
  std::string path_;
};

/// The driver API (libcuda.so.1).
class DriverSymbols : public Library {
public:
  STEP_CUDA_DRIVER_SYMBOLS(STEP_CUDA_DECLARE_SYMBOL)
  /// Optional (null when the driver lacks it): timing of profiled runs.
  STEP_CUDA_DECLARE_SYMBOL(cuEventElapsedTime)
  /// Nullptr with *reason when no candidate opens or lacks a symbol.
  static std::unique_ptr<DriverSymbols>
  load(const std::vector<std::string> &candidates, std::string *reason);
};

/// cuBLASLt (libcublasLt.so).
class CublasLtSymbols : public Library {
public:
  STEP_CUBLASLT_SYMBOLS(STEP_CUDA_DECLARE_SYMBOL)
  static std::unique_ptr<CublasLtSymbols>
  load(const std::vector<std::string> &candidates, std::string *reason);
};

#undef STEP_CUDA_DECLARE_SYMBOL

/// Names tried by default, in order.
std::vector<std::string> defaultDriverNames();   // libcuda.so.1, libcuda.so
std::vector<std::string> defaultCublasLtNames(); // .so, .so.13, .so.12

/// Whether the CUDA backend can run here, and why not.
struct Availability {
  bool ok = false;
  std::string reason; ///< empty when ok
};

/// Initializes the driver (cuInit) and counts devices. Pure in the sense that
/// it touches only `driver`; the stub libcuda of the toolkit gives a clear
/// "no driver" reason here.
Availability probeDevices(const DriverSymbols &driver);

/// The process-wide driver table, loaded on first use (thread-safe); null
/// when the library is missing, with the reason in availability().
const DriverSymbols *driver();
/// The process-wide cuBLASLt table, or null (see cublasLtReason()).
const CublasLtSymbols *cublasLt();
std::string cublasLtReason();
/// Driver present, cuInit succeeded and at least one device exists.
Availability available();

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string errorString(const DriverSymbols &d, CUresult r);
/// Throws rt::Error "CUDA error in <what>: <errorString>" unless r is success.
void check(const DriverSymbols &d, CUresult r, const std::string &what);
/// Throws rt::Error "cuBLASLt error in <what>: <status>" unless success.
void check(const CublasLtSymbols &lt, cublasStatus_t s, const std::string &what);

/// The message of a failed allocation of `bytes` for `what` (the device
/// arena, a param's buffer, the pinned host arena). CUDA_ERROR_OUT_OF_MEMORY
/// says how much the plan asked for against the device's free and total
/// bytes (`freeBytes` < 0: unknown) and how to plan less; any other code
/// reads as check()'s "CUDA error in <what>: <errorText>". Pure: the
/// caller passes errorString's text, so it is tested without a GPU.
std::string allocationError(CUresult r, const std::string &errorText,
                            const std::string &what, int64_t bytes,
                            int64_t freeBytes, int64_t totalBytes);

} // namespace step::rt::cuda

#endif // STEP_RUNTIME_CUDA_DYNAMICSYMBOLS_H
