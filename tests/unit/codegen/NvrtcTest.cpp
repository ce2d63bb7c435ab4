//===- NvrtcTest.cpp - Every kernel of real training steps through NVRTC --===//
//
// The MLP and GPT-2 training steps (built with step::buildTrainStep from
// the examples' traced models), and every op family in f16 and bf16, are
// emitted and compiled to sm_80 and sm_90 cubins plus compute_80 PTX in a
// temporary cache (two NVRTC runs a kernel: the PTX is the sm_80 run's,
// which must equal a compute_80 run's); a second compile must be served by
// the cache; a broken source must name the file holding its source and the
// NVRTC log. No GPU.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "compiler/codegen/Nvrtc.h"
#include "compiler/pipeline/Train.h"
#include "compiler/trace/Trace.h"
#include "examples/gpt2/Model.h"
#include "examples/mlp/MLP.h"
#include "runtime/Tensor.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

namespace {
using namespace step::codegen;
using namespace step::codegen::test;
namespace fs = std::filesystem;

/// A fresh cache directory, removed at the end of the test.
class TempCache {
public:
  explicit TempCache(const std::string &suffix = "") {
    path_ = fs::temp_directory_path() /
            ("stepjit-codegen-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() +
             suffix);
    fs::remove_all(path_);
  }
  ~TempCache() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

private:
  fs::path path_;
};

/// The kernels of @train_step for a model given as the text of @forward.
std::vector<KernelSource> trainStepKernels(const std::string &model,
                                           const step::TrainOptions &opts) {
  Parsed p = parse(model);
  if (!p.module)
    return {};
  EXPECT_TRUE(mlir::succeeded(step::buildTrainStep(*p.module, opts)));
  auto f = p.func("train_step");
  if (!f) {
    ADD_FAILURE() << "no @train_step";
    return {};
  }
  return emitFunctionKernels(f);
}

/// Compiles cold then warm and checks every output; prints the numbers.
void compileTwice(const std::string &what,
                  const std::vector<KernelSource> &kernels) {
  ASSERT_FALSE(kernels.empty());
  TempCache cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  CompileStats cold, warm;
  std::vector<CompiledKernel> out = compileKernels(kernels, opts, &cold);
  ASSERT_EQ(out.size(), kernels.size());
  std::set<std::string> distinct;
  for (size_t k = 0; k < kernels.size(); ++k) {
    distinct.insert(kernels[k].source);
    EXPECT_EQ(out[k].name, kernels[k].name);
    for (const char *arch : {"sm_80", "sm_90"}) {
      const std::string &cubin = out[k].cubin[arch];
      ASSERT_GT(cubin.size(), 4u) << kernels[k].name << " " << arch;
      EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF") << kernels[k].name;
    }
    EXPECT_TRUE(contains(out[k].ptx, ".entry " + kernels[k].name))
        << kernels[k].name;
  }
  // sm_80 (with compute_80's PTX) and sm_90.
  int64_t jobs = static_cast<int64_t>(distinct.size()) * 2;
  EXPECT_EQ(cold.compiled, jobs);
  EXPECT_EQ(cold.cacheHits, 0);

  std::vector<CompiledKernel> again = compileKernels(kernels, opts, &warm);
  EXPECT_EQ(warm.compiled, 0);
  EXPECT_EQ(warm.cacheHits, jobs);
  for (size_t k = 0; k < kernels.size(); ++k) {
    EXPECT_EQ(again[k].cubin, out[k].cubin) << kernels[k].name;
    EXPECT_EQ(again[k].ptx, out[k].ptx) << kernels[k].name;
  }
  std::cout << "[codegen] " << what << ": " << kernels.size()
            << " kernels (" << distinct.size() << " distinct), " << jobs
            << " NVRTC jobs; cold " << cold.seconds << " s, warm "
            << warm.seconds << " s (NVRTC " << nvrtcVersionString() << ")\n";
}

/// The kernels of the MLP 8-16-16-4's training step (batch 8, AdamW,
/// clipped: the global-norm reductions too).
std::vector<KernelSource> mlpTrainStepKernels() {
  step::trace::Graph g;
  mlp::Sizes s;
  s.in = 8, s.hidden1 = 16, s.hidden2 = 16, s.classes = 4, s.batch = 8;
  mlp::traceMLP(g, s);
  step::TrainOptions opts;
  opts.clipNorm = 1.0;
  return trainStepKernels(g.mlir(), opts);
}

/// The kernels of the GPT-2 example's training step (its tiny
/// configuration: attention, row chains, the loss, AdamW).
std::vector<KernelSource> gpt2TrainStepKernels() {
  using namespace step::trace;
  gpt2::GPT2Config cfg;
  Graph g;
  Tensor tokens = g.input("tokens", {cfg.batch, cfg.context}, DType::I64);
  Tensor targets = g.input("targets", {cfg.batch, cfg.context}, DType::I64);
  g.output(gpt2::buildGPT2(g, cfg, tokens, targets));
  return trainStepKernels(g.mlir(), step::TrainOptions{});
}

TEST(Nvrtc, MlpTrainStepCompilesForSm80AndSm90) {
  compileTwice("MLP", mlpTrainStepKernels());
}

// The compute_80 PTX is taken from the sm_80 run (Nvrtc.cpp): it must be
// the bytes a compute_80 run of its own gives. The MLP and GPT-2 steps'
// kernels compiled both ways: sm_80 with compute_80 (one run a kernel, the
// PTX from the cubin's) and compute_80 alone (one run a kernel, the PTX
// its own).
TEST(Nvrtc, PtxOfTheCubinsRunIsTheVirtualArchitectures) {
  std::vector<KernelSource> kernels = mlpTrainStepKernels();
  for (KernelSource &k : gpt2TrainStepKernels())
    kernels.push_back(std::move(k));
  ASSERT_FALSE(kernels.empty());
  std::set<std::string> distinct;
  for (const KernelSource &k : kernels)
    distinct.insert(k.source);
  auto n = static_cast<int64_t>(distinct.size());
  TempCache cacheA("-a"), cacheB("-b");
  NvrtcOptions riding, alone;
  riding.cacheDir = cacheA.str();
  riding.archs = {"sm_80"};
  alone.cacheDir = cacheB.str();
  alone.archs = {};
  CompileStats ridingStats, aloneStats;
  std::vector<CompiledKernel> a = compileKernels(kernels, riding, &ridingStats);
  std::vector<CompiledKernel> b = compileKernels(kernels, alone, &aloneStats);
  EXPECT_EQ(ridingStats.compiled, n);
  EXPECT_EQ(aloneStats.compiled, n);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(contains(a[k].ptx, ".entry " + kernels[k].name));
    EXPECT_TRUE(b[k].cubin.empty());
    EXPECT_EQ(a[k].ptx, b[k].ptx) << kernels[k].name;
  }
  // Each PTX is in the cache under compute_80's key: a PTX-only run over
  // the riding cache reads every PTX and compiles nothing.
  CompileStats mixed;
  alone.cacheDir = cacheA.str();
  std::vector<CompiledKernel> c = compileKernels(kernels, alone, &mixed);
  EXPECT_EQ(mixed.compiled, 0);
  EXPECT_EQ(mixed.cacheHits, n);
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(c[k].ptx, a[k].ptx) << kernels[k].name;
}

TEST(Nvrtc, Gpt2TrainStepCompilesForSm80AndSm90) {
  compileTwice("GPT-2", gpt2TrainStepKernels());
}

/// Offload and reload copies (step-offload, step-offload-optimizer) are
/// the runtime's copies on its copy streams: no kernel, and no error.
TEST(Nvrtc, OffloadCopiesNeedNoKernel) {
  auto check = [](const std::string &what, const std::string &model,
                  const step::TrainOptions &opts) {
    Parsed p = parse(model);
    ASSERT_TRUE(p.module) << what;
    ASSERT_TRUE(mlir::succeeded(step::buildTrainStep(*p.module, opts)))
        << what;
    auto f = p.func("train_step");
    ASSERT_TRUE(f) << what;
    int copies = 0;
    f.walk([&](mlir::Operation *op) {
      copies += mlir::isa<mlir::step::OffloadOp, mlir::step::ReloadOp>(op);
    });
    EXPECT_GT(copies, 0) << what << ": nothing offloaded";
    std::vector<KernelSource> kernels;
    try {
      kernels = emitFunctionKernels(f);
    } catch (const std::exception &e) {
      FAIL() << what << ": " << e.what();
    }
    EXPECT_FALSE(kernels.empty()) << what;
    for (const KernelSource &k : kernels)
      EXPECT_FALSE((mlir::isa<mlir::step::OffloadOp, mlir::step::ReloadOp>(
          k.op)))
          << what << ": " << k.name;
  };
  step::trace::Graph mlpGraph;
  mlp::Sizes s;
  s.in = 8, s.hidden1 = 16, s.hidden2 = 16, s.classes = 4, s.batch = 8;
  mlp::traceMLP(mlpGraph, s);
  step::TrainOptions zero;
  zero.offloadOptimizer = true;
  check("ZeRO-Offload", mlpGraph.mlir(), zero);

  using namespace step::trace;
  gpt2::GPT2Config cfg;
  Graph g;
  Tensor tokens = g.input("tokens", {cfg.batch, cfg.context}, DType::I64);
  Tensor targets = g.input("targets", {cfg.batch, cfg.context}, DType::I64);
  g.output(gpt2::buildGPT2(g, cfg, tokens, targets));
  step::TrainOptions all;
  all.offload = step::OffloadOptions::parse("all,min_bytes=0");
  check("--offload=all", g.mlir(), all);
}

/// Every op family in one element type, for the f16/bf16 code paths the
/// f32 models above do not reach.
std::string allOps(const std::string &t) {
  std::string s = R"(
func.func @f(%a: tensor<8x32xT>, %b: tensor<8x32xT>, %i: tensor<8xi64>,
             %w: tensor<32xT>, %tab: tensor<50x32xT>, %q: tensor<2x8x16xT>,
             %y: tensor<8xi64>, %g: tensor<T>, %t: tensor<i64>,
             %lr: tensor<f32>, %big: tensor<256x512xT>, %ig: tensor<8x32xT>) {
  %0 = step.gelu %a approximate none : tensor<8x32xT>
  %1 = step.sigmoid %a : tensor<8x32xT>
  %2 = step.max %a, %b : tensor<8x32xT>
  %3 = step.pow %a, %b : tensor<8x32xT>
  %4 = step.compare ge, %a, %b : tensor<8x32xT>
  %5 = step.select %4, %a, %b : tensor<8x32xi1>, tensor<8x32xT>
  %6 = step.cast %a : tensor<8x32xT> -> tensor<8x32xi64>
  %7 = step.cast %6 : tensor<8x32xi64> -> tensor<8x32xT>
  %8 = step.cast %a : tensor<8x32xT> -> tensor<8x32xf32>
  %9 = step.dropout %a offset %t p = 1.0e-01 seed = 7 : tensor<8x32xT>, tensor<i64>
  %10 = step.transpose %a, perm = [1, 0] : tensor<8x32xT> -> tensor<32x8xT>
  %11 = step.broadcast_in_dim %w, dims = [1] : tensor<32xT> -> tensor<8x32xT>
  %12 = step.pad %a low = [1, 0] high = [0, 2] value = -1.0 : tensor<8x32xT> -> tensor<9x34xT>
  %13 = step.concat %a, %b dim = 1 : tensor<8x32xT>, tensor<8x32xT> -> tensor<8x64xT>
  %14 = step.slice %a start = [0, 1] limit = [8, 32] strides = [2, 3] : tensor<8x32xT> -> tensor<4x11xT>
  %15 = step.iota dim = 0 : tensor<8x32xT>
  %16 = step.embedding %i, %tab : tensor<8xi64>, tensor<50x32xT> -> tensor<8x32xT>
  %17 = step.embedding_grad %i, %ig num_embeddings = 50 : tensor<8xi64>, tensor<8x32xT> -> tensor<50x32xT>
  %18 = step.reduce_sum %a dims = [0] : tensor<8x32xT> -> tensor<32xT>
  %19 = step.reduce_max %a dims = [1] : tensor<8x32xT> -> tensor<8xT>
  %20 = step.reduce_mean %big dims = [0, 1] : tensor<256x512xT> -> tensor<T>
  %21 = step.softmax %a dim = 0 : tensor<8x32xT>
  %22 = step.log_softmax %a dim = 1 : tensor<8x32xT>
  %23 = step.layer_norm %a, %w, %w eps = 1.0e-05 : tensor<8x32xT>, tensor<32xT>, tensor<32xT>
  %24 = step.cross_entropy %a, %y reduction = none : tensor<8x32xT>, tensor<8xi64> -> tensor<8xT>
  %25 = step.cross_entropy %a, %y reduction = mean : tensor<8x32xT>, tensor<8xi64> -> tensor<T>
  %26 = step.cross_entropy_grad %a, %y, %g reduction = mean : tensor<8x32xT>, tensor<8xi64>, tensor<T> -> tensor<8x32xT>
  %27 = step.attention %q, %q, %q causal : tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT> -> tensor<2x8x16xT>
  %28 = step.stop_gradient %a : tensor<8x32xT>
  %29:3 = step.adamw_update %a, %b, %a, %b, %t, %lr : tensor<8x32xT>, tensor<i64>, tensor<f32>
  %30:3 = step.lamb_update %a, %b, %a, %b, %t, %lr : tensor<8x32xT>, tensor<i64>, tensor<f32>
  %31:2 = step.sgd_update %a, %b, %t, %lr momentum_buffer %a {momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : (tensor<8x32xT>, tensor<8x32xT>, tensor<i64>, tensor<f32>, tensor<8x32xT>) -> (tensor<8x32xT>, tensor<8x32xT>)
  %32 = step.neg %i : tensor<8xi64>
  %33 = step.div %i, %i : tensor<8xi64>
  %34 = step.reduce_sum %i dims = [0] : tensor<8xi64> -> tensor<i64>
  %35 = step.check_finite %a, %g, %w : tensor<8x32xT>, tensor<T>, tensor<32xT>
  %36:3 = step.attention_grad %q, %q, %q, %q causal : tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT> -> tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>
  %37 = step.attention %q, %q, %q valid %t : tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<i64> -> tensor<2x8x16xT>
  %38:3 = step.attention_grad %q, %q, %q, %q valid %t causal : tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<i64> -> tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>
  %39:2 = step.attention_lse %q, %q, %q valid %t causal : tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<i64> -> tensor<2x8x16xT>, tensor<2x8xf32>
  %40:3 = step.attention_grad %q, %q, %q, %q valid %t saved(%39#0, %39#1 : tensor<2x8x16xT>, tensor<2x8xf32>) causal : tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<i64> -> tensor<2x8x16xT>, tensor<2x8x16xT>, tensor<2x8x16xT>
  %41 = step.gelu_grad %a, %b approximate tanh : tensor<8x32xT>
  %42 = step.gelu_grad %a, %b approximate none : tensor<8x32xT>
  return
}
)";
  for (size_t at; (at = s.find("xT>")) != std::string::npos;)
    s.replace(at, 3, "x" + t + ">");
  for (size_t at; (at = s.find("<T>")) != std::string::npos;)
    s.replace(at, 3, "<" + t + ">");
  return s;
}

TEST(Nvrtc, EveryOpFamilyCompilesInEveryFloatType) {
  TempCache cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  opts.archs = {"sm_80"};
  opts.ptxArch.clear();
  for (const char *t : {"f32", "f16", "bf16"}) {
    Parsed p = parse(allOps(t));
    ASSERT_TRUE(p.module);
    std::vector<KernelSource> kernels = emitFunctionKernels(p.func());
    EXPECT_EQ(kernels.size(), 43u) << t;
    CompileStats stats;
    std::vector<CompiledKernel> out = compileKernels(kernels, opts, &stats);
    for (const CompiledKernel &k : out)
      EXPECT_FALSE(k.cubin.at("sm_80").empty()) << t << " " << k.name;
  }
}

TEST(Nvrtc, AttentionGradCompilesForEmptyDims) {
  // An empty query (its kernel still zeroes dk and dv) and D = 0 (no
  // zero-length register arrays).
  Parsed p = parse(R"(
func.func @f(%q: tensor<2x0x8xbf16>, %k: tensor<2x5x8xbf16>, %v: tensor<2x5x3xbf16>, %g: tensor<2x0x3xbf16>,
             %q0: tensor<2x4x0xf32>, %k0: tensor<2x5x0xf32>, %v0: tensor<2x5x3xf32>, %g0: tensor<2x4x3xf32>) {
  %a:3 = step.attention_grad %q, %k, %v, %g causal : tensor<2x0x8xbf16>, tensor<2x5x8xbf16>, tensor<2x5x3xbf16>, tensor<2x0x3xbf16> -> tensor<2x0x8xbf16>, tensor<2x5x8xbf16>, tensor<2x5x3xbf16>
  %b:3 = step.attention_grad %q0, %k0, %v0, %g0 scale = 1.0 : tensor<2x4x0xf32>, tensor<2x5x0xf32>, tensor<2x5x3xf32>, tensor<2x4x3xf32> -> tensor<2x4x0xf32>, tensor<2x5x0xf32>, tensor<2x5x3xf32>
  return
}
)");
  ASSERT_TRUE(p.module);
  TempCache cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  opts.archs = {"sm_80"};
  opts.ptxArch.clear();
  std::vector<KernelSource> kernels = emitFunctionKernels(p.func());
  ASSERT_EQ(kernels.size(), 2u);
  CompileStats stats;
  for (const CompiledKernel &k : compileKernels(kernels, opts, &stats))
    EXPECT_FALSE(k.cubin.at("sm_80").empty()) << k.name;
}

TEST(Nvrtc, CompileErrorNamesTheSavedSourceAndLog) {
  TempCache cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  KernelSource bad;
  bad.name = "broken";
  bad.source = "extern \"C\" __global__ void broken(float *out0) {\n"
               "  out0[0] = undeclared_value;\n}\n";
  bad.params = {"out0"};
  std::string message;
  try {
    compileKernels({bad}, opts);
  } catch (const step::rt::Error &e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "expected rt::Error";
  auto at = message.find("saved to ");
  ASSERT_NE(at, std::string::npos) << message;
  std::string path = message.substr(at + 9, message.find('\n', at) - at - 9);
  ASSERT_TRUE(fs::exists(path)) << path;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(contains(text.str(), "out0[0] = undeclared_value;"));
  EXPECT_TRUE(contains(text.str(), "NVRTC"));
  EXPECT_TRUE(contains(text.str(), "undeclared_value\" is undefined"))
      << text.str();
  EXPECT_TRUE(contains(message, "kernel 'broken'"));
}

TEST(Nvrtc, CacheKeyDependsOnSourceAndTarget) {
  std::string a = cacheKey("x", "sm_80");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, cacheKey("x", "sm_80"));
  EXPECT_NE(a, cacheKey("x", "sm_90"));
  EXPECT_NE(a, cacheKey("y", "sm_80"));
}

} // namespace
