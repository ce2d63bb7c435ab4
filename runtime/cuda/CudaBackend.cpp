//===- CudaBackend.cpp - Runs an execution plan on a CUDA GPU -------------===//
//
// Construction does every fallible preparation (module loads, allocations,
// cuBLASLt descriptors and heuristics), so a run only records launches: the
// first run captures them into a graph, later runs replay it. Every launch
// is prepared as an Op holding the exact device pointers it uses; arguments
// live in fixed buffers, so the captured graph stays valid across runs.
//
// Offload and reload copies are Ops too, placed in the list where
// copySchedule says: a fork (an event recorded on the compute stream, waited
// for by a copy stream, then the copy and its `done` event) and a join (the
// compute stream waits for `done`). Fork/join through events is what stream
// capture records as graph edges; the copy streams are joined once more at
// the end of the list, so every capture ends with all its streams joined.
//
// The Op list is built in CudaOps.cpp; arguments carried from step to step
// on the device (params, optimizer state) in CudaCarried.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaExecutorImpl.h"

#include "runtime/cpu/EvalStep.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace step::rt::cuda {

CudaExecutor::Impl::~Impl() {
  if (!d)
    return;
  // Errors are ignored: a destructor cannot report them, and the context
  // may already be unusable after a failed run.
  d->cuCtxSetCurrent(ctx);
  for (CUstream s : {stream, d2h, h2d})
    if (s)
      d->cuStreamSynchronize(s);
  destroyCollectives();
  if (graphExec)
    d->cuGraphExecDestroy(graphExec);
  if (graph)
    d->cuGraphDestroy(graph);
  for (MatmulOp &m : matmuls) {
    if (m.a) lt->cublasLtMatrixLayoutDestroy(m.a);
    if (m.b) lt->cublasLtMatrixLayoutDestroy(m.b);
    if (m.c) lt->cublasLtMatrixLayoutDestroy(m.c);
    if (m.desc) lt->cublasLtMatmulDescDestroy(m.desc);
  }
  if (ltHandle)
    lt->cublasLtDestroy(ltHandle);
  for (auto &[name, module] : modules)
    d->cuModuleUnload(module);
  for (CUdeviceptr p : allocations)
    d->cuMemFree(p);
  if (hostArena)
    d->cuMemFreeHost(hostArena);
  for (void *p : hostAllocations)
    d->cuMemFreeHost(p);
  for (CUevent e : events)
    d->cuEventDestroy(e);
  for (CUstream s : {stream, d2h, h2d, commStream})
    if (s)
      d->cuStreamDestroy(s);
  if (ctx)
    d->cuDevicePrimaryCtxRelease(device);
}

void CudaExecutor::Impl::checkAlloc(CUresult r, const std::string &what,
                                    int64_t bytes) const {
  if (r == CUDA_SUCCESS)
    return;
  size_t freeBytes = 0, totalBytes = 0;
  bool known = d->cuMemGetInfo(&freeBytes, &totalBytes) == CUDA_SUCCESS;
  throw Error(allocationError(r, errorString(*d, r), what, bytes,
                              known ? static_cast<int64_t>(freeBytes) : -1,
                              static_cast<int64_t>(totalBytes)));
}

CUdeviceptr CudaExecutor::Impl::alloc(int64_t bytes, const std::string &what) {
  CUdeviceptr p = 0;
  // cuMemAlloc refuses 0 bytes; a 256-byte allocation is aligned for any
  // vector access.
  checkAlloc(
      d->cuMemAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 256))),
      "cuMemAlloc of " + what, bytes);
  allocations.push_back(p);
  allocatedBytes += std::max<int64_t>(bytes, 256);
  return p;
}

CUevent CudaExecutor::Impl::event(bool timing) {
  CUevent e = nullptr;
  // No timing unless asked: it would make every wait on it costlier.
  ck(d->cuEventCreate(&e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING),
     "cuEventCreate");
  events.push_back(e);
  return e;
}

void CudaExecutor::Impl::init() {
  Availability av = available();
  if (!av.ok)
    throw Error("the CUDA backend is not available: " + av.reason);
  d = driver();
  ck(d->cuDeviceGet(&device, options.device),
     "cuDeviceGet(" + std::to_string(options.device) + ")");
  ck(d->cuDeviceGetAttribute(&ccMajor,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                             device), "cuDeviceGetAttribute");
  ck(d->cuDeviceGetAttribute(&ccMinor,
                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                             device), "cuDeviceGetAttribute");
  arch = archName(ccMajor, ccMinor);
  ck(d->cuDeviceGetAttribute(
         &sharedOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
         device), "cuDeviceGetAttribute");
  ck(d->cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  ck(d->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  ck(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

void CudaExecutor::Impl::allocate() {
  if (plan.arenaBytes < 0)
    throw Error("plan: negative arena size " + std::to_string(plan.arenaBytes));
  if (plan.hostBytes < 0)
    throw Error("plan: negative host arena size " +
                std::to_string(plan.hostBytes));
  CUdeviceptr arena = alloc(plan.arenaBytes, "the arena");
  if (plan.hostBytes > 0) {
    // Pinned: an async copy from pageable memory is neither asynchronous
    // nor capturable into a graph.
    void *p = nullptr;
    checkAlloc(d->cuMemHostAlloc(&p, static_cast<size_t>(plan.hostBytes), 0),
               "cuMemHostAlloc of the pinned host arena", plan.hostBytes);
    hostArena = static_cast<uint8_t *>(p);
  }
  auto constants = artifact->sections.find("constants");
  ptrOf.assign(plan.buffers.size(), 0);
  hostOf.assign(plan.buffers.size(), nullptr);
  for (size_t id = 0; id < plan.buffers.size(); ++id) {
    const BufferDesc &b = plan.buffers[id];
    bool transient = b.kind == BufferKind::Transient;
    bool host = b.kind == BufferKind::Host;
    if (b.host) {
      // A param or state buffer in host memory (ZeRO-Offload): pinned, so
      // reloads from it are asynchronous and capturable.
      void *p = nullptr;
      checkAlloc(d->cuMemHostAlloc(&p, static_cast<size_t>(std::max<int64_t>(
                                           b.bytes(), 1)),
                                   0),
                 "cuMemHostAlloc of " + bufferStr(plan, id), b.bytes());
      hostAllocations.push_back(p);
      hostOf[id] = p;
      continue;
    }
    if (!transient && !host && b.kind != BufferKind::Constant) {
      ptrOf[id] = alloc(b.bytes(), bufferStr(plan, id));
      continue;
    }
    int64_t limit = transient ? plan.arenaBytes
                    : host    ? plan.hostBytes
                    : constants != artifact->sections.end()
                        ? static_cast<int64_t>(constants->second.size())
                        : -1;
    if (limit < 0)
      throw Error("plan: constant " + bufferStr(plan, id) +
                  " needs the artifact's \"constants\" section, which is "
                  "missing");
    if (b.offset < 0 || b.bytes() > limit || b.offset > limit - b.bytes())
      throw Error("plan: " + bufferStr(plan, id) + " of " +
                  std::to_string(b.bytes()) + " bytes at offset " +
                  std::to_string(b.offset) + " does not fit in the " +
                  (transient ? "arena"
                   : host    ? "host arena"
                             : "constants section") +
                  " of " + std::to_string(limit) + " bytes");
    if (host) {
      // Copies need no alignment; only a kernel would.
      hostOf[id] = hostArena ? hostArena + b.offset : nullptr;
      continue;
    }
    if (!transient) {
      ptrOf[id] = alloc(b.bytes(), bufferStr(plan, id));
      if (b.bytes())
        ck(d->cuMemcpyHtoDAsync(ptrOf[id], constants->second.data() + b.offset,
                                static_cast<size_t>(b.bytes()), stream),
           "uploading constant " + bufferStr(plan, id));
      continue;
    }
    if (b.offset % 16 != 0)
      throw Error("plan: " + bufferStr(plan, id) + " is at arena offset " +
                  std::to_string(b.offset) +
                  ", which is not 16-byte aligned as CUDA kernels need "
                  "(docs/codegen.md); compile with step-memory-plan's "
                  "default alignment");
    ptrOf[id] = arena + static_cast<CUdeviceptr>(b.offset);
  }
  ck(d->cuStreamSynchronize(stream), "uploading constants");
}

CUfunction CudaExecutor::Impl::function(const std::string &kernel) {
  if (auto it = functions.find(kernel); it != functions.end())
    return it->second;
  KernelImage image =
      selectKernelImage(artifact->sections, kernel, ccMajor, ccMinor);
  const std::string &bytes = artifact->sections.at(image.section);
  // PTX must be NUL-terminated for the JIT; a cubin is passed as is.
  std::string ptx = image.isPtx ? bytes + std::string(1, '\0') : std::string();
  CUmodule module = nullptr;
  ck(d->cuModuleLoadData(&module, image.isPtx ? ptx.data() : bytes.data()),
     "cuModuleLoadData(" + image.section + ")" +
         (image.isPtx ? " (JIT of PTX for " + arch + ")" : ""));
  modules[kernel] = module;
  CUfunction fn = nullptr;
  ck(d->cuModuleGetFunction(&fn, module, kernel.c_str()),
     "cuModuleGetFunction('" + kernel + "') in " + image.section);
  functions[kernel] = fn;
  return fn;
}

void CudaExecutor::Impl::prepareKernel(const PlanStep &s, Op &op) {
  auto table = artifact->meta.find("kernels");
  if (table == artifact->meta.end() || !table->is_object() ||
      !table->contains(s.kernel))
    throw Error(op.where + ": kernel '" + s.kernel +
                "' has no launch configuration in the manifest's "
                "meta.kernels");
  const nlohmann::json &k = (*table)[s.kernel];
  int64_t grid = k.at("grid").get<int64_t>(), block = k.at("block").get<int64_t>();
  int64_t shared = k.at("shared_bytes").get<int64_t>();
  auto checked = [&](const std::string &name, int64_t grid, int64_t block,
                     int64_t shared) {
    if (grid < 1 || grid > INT32_MAX || block < 1 || block > 1024 ||
        shared < 0 || shared > INT32_MAX)
      throw Error(op.where + ": kernel '" + name + "' has a bad launch "
                  "configuration (grid " + std::to_string(grid) + ", block " +
                  std::to_string(block) + ", shared " + std::to_string(shared) +
                  " bytes)");
  };
  checked(s.kernel, grid, block, shared);
  // Without opting in, a block has 48 KiB of shared memory, its static
  // arrays and the launch's dynamic bytes together: a kernel whose dynamic
  // bytes fit 48 KiB but not beside its static arrays fails its launch
  // (CUDA_ERROR_INVALID_VALUE). So the function opts in whenever the sum
  // passes 48 KiB, up to the device's per-block maximum.
  auto raise = [&](CUfunction fn, const std::string &name, int64_t shared) {
    int fixed = 0;
    ck(d->cuFuncGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
       op.where + ": the static shared memory of '" + name + "'");
    int64_t total = fixed + shared;
    if (total <= 48 * 1024)
      return;
    if (total > sharedOptin)
      throw Error(op.where + ": kernel '" + name + "' needs " +
                  std::to_string(total) + " bytes of shared memory a block (" +
                  std::to_string(fixed) + " static, " +
                  std::to_string(shared) + " dynamic); this device allows " +
                  std::to_string(sharedOptin));
    ck(d->cuFuncSetAttribute(fn,
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             static_cast<int>(shared)),
       op.where + ": raising the dynamic shared memory of '" + name + "'");
  };
  op.kind = Op::Kernel;
  op.fn = function(s.kernel);
  op.grid = static_cast<unsigned>(grid);
  op.block = static_cast<unsigned>(block);
  op.shared = static_cast<unsigned>(shared);
  raise(op.fn, s.kernel, shared);
  if (auto then = k.find("then"); then != k.end()) {
    for (const nlohmann::json &t : *then) {
      std::string name = t.at("name").get<std::string>();
      int64_t g = t.at("grid").get<int64_t>(), b = t.at("block").get<int64_t>();
      int64_t sh = t.at("shared_bytes").get<int64_t>();
      checked(name, g, b, sh);
      Op::Launch l;
      // The same module as the step's kernel.
      ck(d->cuModuleGetFunction(&l.fn, modules.at(s.kernel), name.c_str()),
         op.where + ": cuModuleGetFunction('" + name + "')");
      raise(l.fn, name, sh);
      l.grid = static_cast<unsigned>(g);
      l.block = static_cast<unsigned>(b);
      l.shared = static_cast<unsigned>(sh);
      op.then.push_back(l);
    }
  }
  for (const std::string &p : k.at("params").get<std::vector<std::string>>()) {
    bool in = p.rfind("in", 0) == 0, out = p.rfind("out", 0) == 0;
    std::string digits = p.substr(in ? 2 : 3);
    const std::vector<int64_t> &ids = in ? s.operands : s.results;
    size_t i = (in || out) && !digits.empty() &&
                       digits.find_first_not_of("0123456789") == std::string::npos
                   ? std::stoul(digits)
                   : SIZE_MAX;
    if (i >= ids.size())
      throw Error(op.where + ": kernel '" + s.kernel + "' parameter '" + p +
                  "' names no " + (out ? "result" : "operand") + " of the step");
    op.ptrs.push_back(ptrOf[ids[i]]);
  }
  for (CUdeviceptr &p : op.ptrs)
    op.params.push_back(&p);
}

/// The host function of a host step: copies its operands out of host
/// memory, runs the CPU kernel, copies the results into the host arena.
static void CUDA_CB runHostStep(void *data) {
  auto *h = static_cast<HostStep *>(data);
  try {
    const PlanStep &s = h->plan->steps[h->step];
    std::vector<HostTensor> operands;
    for (size_t i = 0; i < s.operands.size(); ++i) {
      const BufferDesc &b = h->plan->buffers[s.operands[i]];
      operands.emplace_back(b.dtype, b.shape);
      if (b.bytes())
        std::memcpy(operands.back().raw(), h->in[i],
                    static_cast<size_t>(b.bytes()));
    }
    std::vector<HostTensor> results =
        cpu::evalStep(*h->plan, s, std::move(operands));
    for (size_t i = 0; i < s.results.size(); ++i) {
      const BufferDesc &b = h->plan->buffers[s.results[i]];
      if (i >= results.size() ||
          static_cast<int64_t>(results[i].byteSize()) != b.bytes())
        throw Error("the CPU kernel returned a result of another size");
      if (b.bytes())
        std::memcpy(h->out[i], results[i].raw(),
                    static_cast<size_t>(b.bytes()));
    }
  } catch (const std::exception &e) {
    if (h->error.empty())
      h->error = h->where + " (on the host): " + e.what();
  } catch (...) {
    // Nothing may leave a host function (a C callback).
    if (h->error.empty())
      h->error = h->where + " (on the host): an unknown exception";
  }
}

void CudaExecutor::Impl::prepareHostStep(int64_t k, Op &op) {
  const PlanStep &s = plan.steps[k];
  auto h = std::make_shared<HostStep>();
  h->plan = &plan;
  h->step = static_cast<size_t>(k);
  h->where = op.where;
  auto constants = artifact->sections.find("constants");
  h->constants.reserve(s.operands.size());
  for (int64_t id : s.operands) {
    const BufferDesc &b = plan.buffers[id];
    if (b.kind == BufferKind::Constant) {
      // allocate() checked the offset against the section.
      h->constants.push_back(constants->second.substr(
          static_cast<size_t>(b.offset), static_cast<size_t>(b.bytes())));
      h->in.push_back(h->constants.back().data());
    } else {
      h->in.push_back(hostOf[id]);
    }
  }
  for (int64_t id : s.results)
    h->out.push_back(hostOf[id]);
  op.kind = Op::HostFn;
  op.hostStep = h;
  hostSteps.push_back(std::move(h));
}

/// Enqueues every prepared op on the stream (captured or not).
void CudaExecutor::Impl::record(Timing *timed) {
  size_t marks = 0;
  // A timing event on the compute stream; created on first use (timing
  // events, unlike the ops' own), kept for later profiled runs.
  auto mark = [&] {
    if (marks == timed->events.size())
      timed->events.push_back(event(/*timing=*/true));
    ck(d->cuEventRecord(timed->events[marks], stream), "cuEventRecord");
    ++marks;
  };
  if (timed) {
    timed->steps.clear();
    mark();
  }
  for (Op &op : ops) {
    // Ops that run a plan step on the compute stream; a forked collective
    // runs on its own stream, where only its issue would be timed.
    bool onCompute = op.step >= 0 &&
                     (op.kind != Op::Collective || op.done == nullptr) &&
                     op.kind != Op::CopyIn && op.kind != Op::CopyOut;
    switch (op.kind) {
    case Op::Kernel:
      ck(d->cuLaunchKernel(op.fn, op.grid, 1, 1, op.block, 1, 1, op.shared,
                           stream, op.params.data(), nullptr),
         op.where + ": cuLaunchKernel");
      for (const Op::Launch &l : op.then)
        ck(d->cuLaunchKernel(l.fn, l.grid, 1, 1, l.block, 1, 1, l.shared,
                             stream, op.params.data(), nullptr),
           op.where + ": cuLaunchKernel (a further entry point)");
      break;
    case Op::Matmul: {
      MatmulOp &m = matmuls[op.matmul];
      check(*lt, launchMatmul(m, m.algo, stream),
            op.where + ": cublasLtMatmul");
      break;
    }
    case Op::Copy:
      ck(d->cuMemcpyDtoDAsync(op.dst, op.src, op.bytes, stream),
         op.where + ": cuMemcpyDtoDAsync");
      break;
    case Op::Zero:
      ck(d->cuMemsetD8Async(op.dst, 0, op.bytes, stream),
         op.where + ": cuMemsetD8Async");
      break;
    case Op::CopyOut:
    case Op::CopyIn: {
      bool out = op.kind == Op::CopyOut;
      CUstream copy = out ? d2h : h2d;
      ck(d->cuEventRecord(op.ready, stream), op.where + ": cuEventRecord");
      ck(d->cuStreamWaitEvent(copy, op.ready, 0),
         op.where + ": cuStreamWaitEvent");
      for (CUevent e : op.after)
        ck(d->cuStreamWaitEvent(copy, e, 0), op.where + ": cuStreamWaitEvent");
      if (op.bytes && out)
        ck(d->cuMemcpyDtoHAsync(op.host, op.src, op.bytes, copy),
           op.where + ": cuMemcpyDtoHAsync");
      if (op.bytes && !out)
        ck(d->cuMemcpyHtoDAsync(op.dst, op.host, op.bytes, copy),
           op.where + ": cuMemcpyHtoDAsync");
      ck(d->cuEventRecord(op.done, copy), op.where + ": cuEventRecord");
      break;
    }
    case Op::Collective:
      recordCollective(op);
      break;
    case Op::HostFn:
      ck(d->cuLaunchHostFunc(stream, runHostStep, op.hostStep.get()),
         op.where + ": cuLaunchHostFunc");
      break;
    case Op::Join:
      ck(d->cuEventRecord(op.done, op.copyStream),
         op.where + ": cuEventRecord");
      [[fallthrough]];
    case Op::Wait:
      ck(d->cuStreamWaitEvent(stream, op.done, 0),
         op.where + ": cuStreamWaitEvent");
      break;
    }
    if (timed && onCompute) {
      mark();
      timed->steps.emplace_back(op.step,
                                op.kind == Op::HostFn     ? Lane::Host
                                : op.kind == Op::Collective ? Lane::Collective
                                                            : Lane::Compute);
    }
  }
}

void CudaExecutor::Impl::capture() {
  ck(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
     "cuStreamBeginCapture");
  try {
    record();
  } catch (...) {
    // End the capture so the stream is usable again; the partial graph is
    // discarded.
    CUgraph partial = nullptr;
    if (d->cuStreamEndCapture(stream, &partial) == CUDA_SUCCESS && partial)
      d->cuGraphDestroy(partial);
    throw;
  }
  ck(d->cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  ck(d->cuGraphInstantiate(&graphExec, graph, 0), "cuGraphInstantiate");
}

//===----------------------------------------------------------------------===//
// CudaExecutor
//===----------------------------------------------------------------------===//

CudaExecutor::CudaExecutor(const Artifact &artifact, CudaExecutorOptions options)
    : impl_(std::make_unique<Impl>(artifact, options)) {
  Impl &x = *impl_;
  const Plan &plan = artifact.plan;
  x.init();
  size_t freeBytes = 0, totalBytes = 0;
  if (x.d->cuMemGetInfo(&freeBytes, &totalBytes) == CUDA_SUCCESS)
    x.freeAtStart = static_cast<int64_t>(freeBytes);
  // A malformed plan (Plan::validate, which copySchedule runs) is the
  // plan's fault: say so before allocating anything.
  CopySchedule sched = copySchedule(plan);
  x.allocate();
  for (size_t k = 0; k < plan.steps.size(); ++k)
    for (int64_t id : plan.steps[k].results)
      if (plan.buffers[id].kind == BufferKind::Constant)
        throw Error("plan step " + std::to_string(k) + " (" +
                    plan.steps[k].op + "): writes constant " +
                    bufferStr(plan, id) +
                    ", which is uploaded once; the CUDA backend cannot run "
                    "this plan");
  x.prepareOps(sched);
  // Kernel params point into op.ptrs; re-point them now that ops stopped
  // moving.
  for (Op &op : x.ops) {
    op.params.clear();
    for (CUdeviceptr &p : op.ptrs)
      op.params.push_back(&p);
  }
  if (x.lt)
    x.workspace =
        x.alloc(options.matmulWorkspaceBytes, "the cuBLASLt workspace");
  x.artifact = nullptr;
}

CudaExecutor::~CudaExecutor() = default;

const std::string &CudaExecutor::arch() const { return impl_->arch; }

DeviceMemory CudaExecutor::memory() const {
  const Impl &x = *impl_;
  DeviceMemory m;
  m.arenaBytes = x.plan.arenaBytes;
  m.allocatedBytes = x.allocatedBytes;
  size_t freeBytes = 0, totalBytes = 0;
  if (x.freeAtStart >= 0 &&
      x.d->cuCtxSetCurrent(x.ctx) == CUDA_SUCCESS &&
      x.d->cuMemGetInfo(&freeBytes, &totalBytes) == CUDA_SUCCESS) {
    m.measuredBytes = x.freeAtStart - static_cast<int64_t>(freeBytes);
    m.totalBytes = static_cast<int64_t>(totalBytes);
  }
  return m;
}

std::vector<HostTensor> CudaExecutor::run(const std::vector<HostTensor> &args) {
  std::vector<const HostTensor *> ptrs;
  for (const HostTensor &t : args)
    ptrs.push_back(&t);
  return run(ptrs);
}

std::vector<HostTensor>
CudaExecutor::run(const std::vector<const HostTensor *> &args,
                  RunTimeline *timeline) {
  Impl &x = *impl_;
  if (timeline && !x.d->cuEventElapsedTime)
    throw Error("profiling on the GPU needs cuEventElapsedTime, which the "
                "CUDA driver " + x.d->path() + " lacks");
  const Plan &plan = x.plan;
  if (args.size() != plan.arguments.size())
    throw Error("plan '" + plan.function + "' takes " +
                std::to_string(plan.arguments.size()) + " arguments, got " +
                std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const BufferDesc &b = plan.buffers.at(plan.arguments[i]);
    if (args[i]->dtype() != b.dtype || args[i]->shape() != b.shape)
      throw Error("argument " + std::to_string(i) + " ('" + b.name + "', " +
                  bufferKindName(b.kind) + "): expected " +
                  typeStr(b.dtype, b.shape) + ", found " +
                  typeStr(args[i]->dtype(), args[i]->shape()));
  }
  x.ck(x.d->cuCtxSetCurrent(x.ctx), "cuCtxSetCurrent");
  double hostStart = steadySeconds();
  // The previous run ended synchronized: nothing reads host memory now.
  // Copies a commitCarried left queued are ordered before these on the
  // stream.
  auto carriedArgument = [&](size_t i) {
    return i < x.carriedArgument.size() && x.carriedArgument[i];
  };
  auto carriedResult = [&](size_t r) {
    return r < x.carriedResult.size() && x.carriedResult[r];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    int64_t id = plan.arguments[i];
    if (!args[i]->byteSize() || (x.carriedCurrent && carriedArgument(i)))
      continue;
    if (plan.buffers[id].host)
      std::memcpy(x.hostOf[id], args[i]->raw(), args[i]->byteSize());
    else
      x.ck(x.d->cuMemcpyHtoDAsync(x.ptrOf[id], args[i]->raw(),
                                  args[i]->byteSize(), x.stream),
           "uploading argument " + std::to_string(i));
  }
  if (!x.tuneCandidates.empty())
    x.tuneMatmulAlgos(); // before the graph captures the algorithms
  if (timeline) {
    // Timed op by op: outside the graph, as useGraph = false runs.
    x.record(&x.timing);
  } else if (x.options.useGraph) {
    if (!x.graphExec)
      x.capture();
    x.ck(x.d->cuGraphLaunch(x.graphExec, x.stream), "cuGraphLaunch");
  } else {
    x.record();
  }
  std::vector<HostTensor> results;
  for (size_t r = 0; r < plan.results.size(); ++r) {
    int64_t id = plan.results[r];
    const BufferDesc &b = plan.buffers.at(id);
    if (carriedResult(r)) {
      results.emplace_back(); // stays on the device (commitCarried)
      continue;
    }
    results.emplace_back(b.dtype, b.shape);
    if (b.bytes() && !inHostMemory(b))
      x.ck(x.d->cuMemcpyDtoHAsync(results.back().raw(), x.ptrOf[id],
                                  static_cast<size_t>(b.bytes()), x.stream),
           "downloading " + bufferStr(plan, id));
  }
  CUresult synced = x.d->cuStreamSynchronize(x.stream);
  // Every host step's failure of this run is taken (cleared), so the next
  // run reports only its own; the first is thrown.
  std::string hostError;
  for (const std::shared_ptr<HostStep> &h : x.hostSteps) {
    if (hostError.empty())
      hostError = h->error;
    h->error.clear();
  }
  x.ck(synced, "running plan '" + plan.function + "' (a kernel failed)");
  if (!hostError.empty())
    throw Error(hostError);
  for (size_t i = 0; i < plan.results.size(); ++i) {
    const BufferDesc &b = plan.buffers.at(plan.results[i]);
    if (b.bytes() && inHostMemory(b) && !carriedResult(i))
      std::memcpy(results[i].raw(), x.hostOf[plan.results[i]],
                  static_cast<size_t>(b.bytes()));
  }
  if (timeline) {
    // Device times from the first mark, placed after the run's host start
    // (the uploads are queued before it).
    timeline->plan = &plan;
    timeline->spans.clear();
    timeline->start = hostStart;
    const std::vector<CUevent> &e = x.timing.events;
    auto at = [&](size_t i) {
      float ms = 0;
      x.ck(x.d->cuEventElapsedTime(&ms, e[0], e[i]), "cuEventElapsedTime");
      return hostStart + ms * 1e-3;
    };
    double previous = hostStart;
    for (size_t i = 0; i < x.timing.steps.size(); ++i) {
      double end = at(i + 1);
      timeline->spans.push_back(
          {x.timing.steps[i].first, x.timing.steps[i].second, previous, end});
      previous = end;
    }
    timeline->end = std::max(previous, steadySeconds());
  }
  return results;
}

} // namespace step::rt::cuda
