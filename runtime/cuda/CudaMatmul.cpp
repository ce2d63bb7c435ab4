//===- CudaMatmul.cpp - step.matmul through cuBLASLt ----------------------===//
//
// A plain step.matmul or a `matmul` fusion (bias and/or ReLU/GELU epilogue,
// GELU's input stored for the backward, GELU's gradient and the bias
// gradient; MatmulEpilogue.h) prepared as one cuBLASLt call: descriptors and
// layouts (matmulLayout), and the heuristic's algorithm, cached per shape key.
// With CudaExecutorOptions::tuneMatmuls, the heuristic's first
// kMatmulTuneCandidates algorithms of each shape are timed on the step's
// own buffers before the first run (one launch to warm up, then the median
// of kTuneLaunches, each between events), and the fastest is kept: the
// heuristic ranks by a model of the chip, and its first pick can leave
// SMs idle (GPT-2's 768 x 768 weight gradient, K = 8192: 375 TFLOP/s on
// an H200). The matmuls write only their own results (transients, which
// the run writes again before any read), so tuning changes no value. Cost:
// at most 8 x 4 launches per shape, once. With CudaExecutorOptions::
// tuneCache the picks persist (MatmulTuneCache.h): a shape picked before
// on this device and cuBLASLt takes that pick once
// cublasLtMatmulAlgoCheck accepts it within the workspace.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaExecutorImpl.h"
#include "runtime/cuda/MatmulTuneCache.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace step::rt::cuda {
namespace {

cudaDataType_t cudaType(DType t, const std::string &where) {
  switch (t) {
  case DType::F32: return CUDA_R_32F;
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default:
    throw Error(where + ": cuBLASLt matmul supports f32, f16 and bf16, not " +
                dtypeName(t));
  }
}

cublasLtEpilogue_t ltEpilogue(MatmulEpilogue e) {
  switch (e) {
  case MatmulEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
  case MatmulEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
  case MatmulEpilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
  case MatmulEpilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
  case MatmulEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
  case MatmulEpilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  case MatmulEpilogue::GeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX;
  case MatmulEpilogue::GeluAuxBias:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case MatmulEpilogue::DGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case MatmulEpilogue::DGeluBgrad:
    return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  case MatmulEpilogue::BgradA: return CUBLASLT_EPILOGUE_BGRADA;
  case MatmulEpilogue::BgradB: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

} // namespace

void CudaExecutor::Impl::prepareMatmul(const MatmulCall &call, Op &op) {
  const BufferDesc &a = plan.buffers[call.lhs];
  const BufferDesc &b = plan.buffers[call.rhs];
  const BufferDesc &c = plan.buffers[call.result];
  const nlohmann::json &attrs = *call.attrs;
  auto unit = [&](const char *n) {
    return attrs.is_object() && attrs.contains(n) && attrs[n].is_boolean() &&
           attrs[n].get<bool>();
  };
  MatmulLayout l = matmulLayout(a.shape, b.shape, unit("transpose_a"),
                                unit("transpose_b"));
  if (a.dtype != b.dtype || c.dtype != a.dtype || c.shape != l.result)
    throw Error(op.where + ": operands " + typeStr(a.dtype, a.shape) + " and " +
                typeStr(b.dtype, b.shape) + " do not give the result " +
                typeStr(c.dtype, c.shape));
  cudaDataType_t type = cudaType(a.dtype, op.where);
  if (l.k == 0 && call.epilogue != MatmulEpilogue::None && c.bytes() != 0)
    throw Error(op.where + ": a matmul fusion with an empty contraction "
                "(K = 0) and an epilogue; run it with --backend=cpu");
  // BGRADA/BGRADB: the bias gradient is a sum of an operand.
  const bool operandGrad = call.epilogue == MatmulEpilogue::BgradA ||
                           call.epilogue == MatmulEpilogue::BgradB;
  if (operandGrad && (l.m == 0 || l.n == 0 || l.k == 0))
    throw Error(op.where + ": a bias gradient of an empty matmul operand; "
                "run it with --backend=cpu");
  if (l.m == 0 || l.n == 0 || l.k == 0) { // an empty sum is zero
    op.kind = Op::Zero;
    op.dst = ptrOf[call.result];
    op.bytes = static_cast<size_t>(c.bytes());
    return;
  }
  if (!lt) {
    lt = cublasLt();
    if (!lt)
      throw Error(op.where + ": cuBLASLt is not available: " + cublasLtReason());
    check(*lt, lt->cublasLtCreate(&ltHandle), "cublasLtCreate");
  }
  op.kind = Op::Matmul;
  op.matmul = matmuls.size();
  matmuls.emplace_back();
  MatmulOp &m = matmuls.back();
  m.pa = ptrOf[call.rhs]; // cuBLASLt's a is our rhs (CudaBackend.h)
  m.pb = ptrOf[call.lhs];
  m.pc = ptrOf[call.result];
  auto ltck = [&](cublasStatus_t st, const char *what) {
    check(*lt, st, op.where + ": " + what);
  };
  ltck(lt->cublasLtMatmulDescCreate(&m.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
       "cublasLtMatmulDescCreate");
  cublasOperation_t ta = l.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = l.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  ltck(lt->cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &ta, sizeof(ta)), "TRANSA");
  ltck(lt->cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &tb, sizeof(tb)), "TRANSB");
  // The epilogue acts on cuBLASLt's column-major C^T (n rows): a bias of
  // length n (our last dim) is added to every column, i.e. to every row of
  // our row-major result; batch stride 0 shares it across batch entries.
  uintptr_t biasAlign = 0;
  if (call.epilogue != MatmulEpilogue::None) {
    uint32_t epi = ltEpilogue(call.epilogue);
    ltck(lt->cublasLtMatmulDescSetAttribute(
             m.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
         "EPILOGUE");
  }
  // The bias (read) or the bias gradient (written): n elements of the
  // result's type through BIAS_POINTER (BGRADB's: m, cuBLASLt's columns).
  // The heuristic depends on the pointer's alignment: key on it.
  auto setBiasVector = [&](int64_t id, const char *what, int64_t length) {
    const BufferDesc &v = plan.buffers[id];
    if (v.dtype != c.dtype || v.shape != Shape{length})
      throw Error(op.where + ": the " + what + " is " +
                  typeStr(v.dtype, v.shape) + ", expected " +
                  typeStr(c.dtype, Shape{length}));
    void *ptr = reinterpret_cast<void *>(ptrOf[id]);
    int32_t vectorType = static_cast<int32_t>(type);
    ltck(lt->cublasLtMatmulDescSetAttribute(
             m.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof(ptr)),
         "BIAS_POINTER");
    ltck(lt->cublasLtMatmulDescSetAttribute(m.desc,
                                            CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                            &vectorType, sizeof(vectorType)),
         "BIAS_DATA_TYPE");
    biasAlign = ptrOf[id] & 15u;
  };
  if (call.bias >= 0) {
    setBiasVector(call.bias, "bias", l.n);
    int64_t biasStride = 0;
    if (l.batch > 1)
      ltck(lt->cublasLtMatmulDescSetAttribute(
               m.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasStride,
               sizeof(biasStride)),
           "BIAS_BATCH_STRIDE");
  }
  if (operandGrad && l.batch != 1)
    throw Error(op.where + ": the " + matmulEpilogueName(call.epilogue) +
                " epilogue sums one matrix; this matmul is a batch of " +
                std::to_string(l.batch));
  if (call.biasGrad >= 0)
    setBiasVector(call.biasGrad, "bias gradient",
                  call.epilogue == MatmulEpilogue::BgradB ? l.m : l.n);
  // GELU's input (stored by GELU_AUX*, read by DGELU*) has the result's
  // layout: column-major n x m, leading dim n.
  uintptr_t auxAlign = 0;
  if (call.aux >= 0) {
    const BufferDesc &x = plan.buffers[call.aux];
    if (x.dtype != c.dtype || x.shape != c.shape || l.batch != 1 ||
        l.n % 8 != 0)
      throw Error(op.where + ": GELU's input " + typeStr(x.dtype, x.shape) +
                  " must be of the result's type " + typeStr(c.dtype, c.shape) +
                  ", one matrix whose last dim "
                  "is a multiple of 8 (cuBLASLt's aux leading dim)");
    void *auxPtr = reinterpret_cast<void *>(ptrOf[call.aux]);
    int64_t auxLd = l.n;
    ltck(lt->cublasLtMatmulDescSetAttribute(
             m.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &auxPtr,
             sizeof(auxPtr)),
         "EPILOGUE_AUX_POINTER");
    ltck(lt->cublasLtMatmulDescSetAttribute(
             m.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
             sizeof(auxLd)),
         "EPILOGUE_AUX_LD");
    auxAlign = ptrOf[call.aux] & 15u;
  }
  auto layout = [&](cublasLtMatrixLayout_t *out, const MatrixLayout &ml) {
    ltck(lt->cublasLtMatrixLayoutCreate(out, type, static_cast<uint64_t>(ml.rows),
                                        static_cast<uint64_t>(ml.cols), ml.ld),
         "cublasLtMatrixLayoutCreate");
    if (ml.batch == 1)
      return;
    int32_t count = static_cast<int32_t>(ml.batch);
    int64_t stride = ml.stride;
    ltck(lt->cublasLtMatrixLayoutSetAttribute(
             *out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
         "BATCH_COUNT");
    ltck(lt->cublasLtMatrixLayoutSetAttribute(
             *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
             sizeof(stride)),
         "STRIDED_BATCH_OFFSET");
  };
  layout(&m.a, l.a);
  layout(&m.b, l.b);
  layout(&m.c, l.c);
  // The operands' alignment, up to the 256 bytes cuBLASLt's heuristic
  // assumes unless told (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES): an
  // algorithm picked for 256 may fail on a pointer of a plan aligned to 16.
  auto alignOf = [](uint64_t p) {
    uint32_t align = 256;
    while (align > 1 && p % align != 0)
      align /= 2;
    return align;
  };
  const uint32_t alignA = alignOf(m.pa), alignB = alignOf(m.pb),
                 alignC = alignOf(m.pc);
  std::string &key = m.key;
  key = std::string(dtypeName(a.dtype));
  // Everything the algorithm's validity may depend on (a tuned pick, split-K
  // say, is applied to every matmul of the key): strides and alignments.
  for (int64_t v : {l.m, l.n, l.k, l.batch, l.a.stride, l.b.stride, l.c.stride,
                    int64_t(l.transA), int64_t(l.transB), int64_t(alignA),
                    int64_t(alignB), int64_t(alignC)})
    key += "," + std::to_string(v);
  key += std::string(",") + matmulEpilogueName(call.epilogue) + "," +
         std::to_string(call.bias >= 0 || call.biasGrad >= 0
                            ? int64_t(16 + biasAlign)
                            : int64_t(0)) +
         "," + std::to_string(call.aux >= 0 ? int64_t(16 + auxAlign) : 0);
  if (auto it = algoCache.find(key); it != algoCache.end()) {
    m.algo = it->second;
    return;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  ltck(lt->cublasLtMatmulPreferenceCreate(&pref), "MatmulPreferenceCreate");
  uint64_t ws = static_cast<uint64_t>(options.matmulWorkspaceBytes);
  cublasLtMatmulHeuristicResult_t results[kMatmulTuneCandidates]{};
  int wanted = options.tuneMatmuls ? kMatmulTuneCandidates : 1, found = 0;
  cublasStatus_t st = lt->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (auto [attr, value] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}})
    if (st == CUBLAS_STATUS_SUCCESS)
      st = lt->cublasLtMatmulPreferenceSetAttribute(pref, attr, &value,
                                                    sizeof(value));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatmulAlgoGetHeuristic(ltHandle, m.desc, m.a, m.b, m.c,
                                            m.c, pref, wanted, results, &found);
  lt->cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm comes back as NOT_SUPPORTED ("no heuristic function
  // available for current configuration") or as none found; a result's
  // other fields count only where its state is SUCCESS.
  if (st != CUBLAS_STATUS_NOT_SUPPORTED)
    ltck(st, "cublasLtMatmulAlgoGetHeuristic");
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || found < 1 ||
      results[0].state != CUBLAS_STATUS_SUCCESS)
    // an aux matrix or an operand's sum: stepc options
    throw Error(op.where + ": cuBLASLt has no algorithm for " +
                typeStr(a.dtype, a.shape) + " x " + typeStr(b.dtype, b.shape) +
                " with the " + matmulEpilogueName(call.epilogue) + " epilogue" +
                (call.aux >= 0     ? "; compile without --gelu-epilogues"
                 : operandGrad ? "; compile without --bgrad-epilogues"
                               : ""));
  m.algo = algoCache[key] = results[0].algo;
  if (found > 1)
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS)
        tuneCandidates[key].push_back(results[i].algo);
}

cublasStatus_t
CudaExecutor::Impl::launchMatmul(const MatmulOp &m,
                                 const cublasLtMatmulAlgo_t &algo, CUstream s) {
  float one = 1.0f, zero = 0.0f;
  return lt->cublasLtMatmul(
      ltHandle, m.desc, &one, reinterpret_cast<const void *>(m.pa), m.a,
      reinterpret_cast<const void *>(m.pb), m.b, &zero,
      reinterpret_cast<const void *>(m.pc), m.c, reinterpret_cast<void *>(m.pc),
      m.c, &algo, reinterpret_cast<void *>(workspace),
      static_cast<size_t>(options.matmulWorkspaceBytes),
      reinterpret_cast<cudaStream_t>(s));
}

std::string CudaExecutor::Impl::tuneScope() const {
  char name[256] = {};
  ck(d->cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName");
  int sms = 0;
  ck(d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                             device),
     "cuDeviceGetAttribute");
  // The SM count too: a pick is the fastest for the SMs it was timed on
  // (MIG or MPS give a process fewer).
  return std::string(name) + ", " + arch + ", " + std::to_string(sms) +
         " SMs, cuBLASLt " + std::to_string(lt->cublasLtGetVersion());
}

bool CudaExecutor::Impl::algoFits(const MatmulOp &m,
                                  const cublasLtMatmulAlgo_t &algo) const {
  cublasLtMatmulHeuristicResult_t r{};
  return lt->cublasLtMatmulAlgoCheck(ltHandle, m.desc, m.a, m.b, m.c, m.c,
                                     &algo, &r) == CUBLAS_STATUS_SUCCESS &&
         r.state == CUBLAS_STATUS_SUCCESS &&
         r.workspaceSize <= static_cast<size_t>(options.matmulWorkspaceBytes);
}

std::pair<int, int> CudaExecutor::matmulTuning() const {
  return {impl_->tunedShapes, impl_->cachedShapes};
}

void CudaExecutor::Impl::tuneMatmulAlgos() {
  constexpr int kTuneLaunches = 3;
  static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(MatmulTuneCache::Algo),
                "cuBLASLt's algorithm is 8 words");
  std::optional<MatmulTuneCache> cache;
  if (!options.tuneCache.empty() && !tuneCandidates.empty())
    cache.emplace(options.tuneCache, tuneScope());
  auto setPick = [&](const std::string &key, const cublasLtMatmulAlgo_t &a) {
    algoCache[key] = a;
    for (MatmulOp &x : matmuls)
      if (x.key == key)
        x.algo = a;
  };
  CUevent start = event(/*timing=*/true), stop = event(/*timing=*/true);
  for (auto &[key, algos] : tuneCandidates) {
    const MatmulOp *m = nullptr; // the shape's first matmul
    for (const MatmulOp &x : matmuls)
      if (x.key == key) {
        m = &x;
        break;
      }
    if (!m)
      continue;
    if (std::optional<MatmulTuneCache::Algo> kept =
            cache ? cache->find(key) : std::nullopt) {
      cublasLtMatmulAlgo_t a;
      std::memcpy(&a, kept->data(), sizeof a);
      // cublasLtMatmulAlgoCheck's SUCCESS "doesn't fully guarantee algo
      // will run", so the kept pick also runs once here, outside any
      // graph capture (it rewrites only the step's own result, as the
      // timed launches below do).
      if (algoFits(*m, a) && launchMatmul(*m, a, stream) == CUBLAS_STATUS_SUCCESS) {
        setPick(key, a);
        ++cachedShapes;
        continue;
      } // refused (another workspace, say): timed below, and replaced
    }
    ++tunedShapes;
    float best = 0;
    const cublasLtMatmulAlgo_t *pick = nullptr;
    for (const cublasLtMatmulAlgo_t &algo : algos) {
      if (launchMatmul(*m, algo, stream) != CUBLAS_STATUS_SUCCESS)
        continue; // an algorithm that refuses this call is not a choice
      std::vector<float> ms;
      for (int i = 0; i < kTuneLaunches; ++i) {
        ck(d->cuEventRecord(start, stream), "cuEventRecord");
        cublasStatus_t st = launchMatmul(*m, algo, stream);
        ck(d->cuEventRecord(stop, stream), "cuEventRecord");
        ck(d->cuStreamSynchronize(stream), "tuning a matmul");
        float t = 0;
        ck(d->cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
        if (st != CUBLAS_STATUS_SUCCESS)
          break;
        ms.push_back(t);
      }
      if (ms.size() != kTuneLaunches)
        continue;
      std::sort(ms.begin(), ms.end());
      if (!pick || ms[kTuneLaunches / 2] < best)
        best = ms[kTuneLaunches / 2], pick = &algo;
    }
    if (!pick)
      continue; // keeps the heuristic's first
    setPick(key, *pick);
    if (cache) {
      MatmulTuneCache::Algo bytes;
      std::memcpy(bytes.data(), pick, sizeof bytes);
      cache->put(key, bytes);
    }
  }
  tuneCandidates.clear();
  if (cache)
    cache->save();
}

} // namespace step::rt::cuda
