//===- MultiTensorKernelTest.cpp - Kernels of multi_tensor fusions --------===//
//
// Hand-written `multi_tensor` step.fusion ops (the shapes step-fuse forms:
// AdamW and SGD updates behind a gradient-clip prologue, the global norm of
// several gradients with its scalar epilogue) through
// detail::emitMultiTensorFamily: what the source must contain (segment
// table, vector loads, the unfused update's arithmetic, partials and ticket)
// and that NVRTC compiles it for sm_80 and sm_90. The refusals (LAMB, too
// many parameters, a result that is not an update's) throw. No GPU.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "compiler/codegen/Emitters.h"
#include "compiler/codegen/Nvrtc.h"
#include "runtime/Tensor.h"

namespace {
using namespace step::codegen;
using namespace step::codegen::test;

/// The text of a module whose @f holds one multi_tensor fusion: `args` are
/// the fusion's input types (block arguments %a0, %a1, ...), `body` the ops
/// of the body, `yields` the yielded values with their types.
std::string fusionModule(const std::vector<std::string> &args,
                         const std::string &body,
                         const std::vector<std::pair<std::string, std::string>>
                             &yields) {
  std::string fnArgs, inputs, inTypes, blockArgs, outTypes, yVals, yTypes;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string sep = i ? ", " : "", I = std::to_string(i);
    fnArgs += sep + "%x" + I + ": " + args[i];
    inputs += sep + "%x" + I;
    inTypes += sep + args[i];
    blockArgs += sep + "%a" + I + ": " + args[i];
  }
  for (size_t j = 0; j < yields.size(); ++j) {
    std::string sep = j ? ", " : "";
    yVals += sep + yields[j].first;
    yTypes += sep + yields[j].second;
  }
  std::string results =
      yields.size() == 1 ? "%r" : "%r:" + std::to_string(yields.size());
  return "func.func @f(" + fnArgs + ") {\n  " + results +
         " = step.fusion \"multi_tensor\" (" + inputs + ") : (" + inTypes +
         ") -> (" + yTypes + ") {\n  ^bb0(" + blockArgs + "):\n" + body +
         "    step.yield " + yVals + " : " + yTypes + "\n  }\n  return\n}\n";
}

/// The multi-tensor kernel of the fusion in `text`, named "k".
KernelSource multiTensorKernel(const std::string &text) {
  Parsed p = parse(text);
  if (!p.module)
    return {};
  mlir::Operation &op = p.func().getBody().front().front();
  auto ks = detail::emitMultiTensorFamily(&op, "k");
  EXPECT_TRUE(ks.has_value()) << "no kernel for " << text;
  return ks ? *ks : KernelSource{};
}


/// Three AdamW updates of sizes 7, 1024 and 96x32 whose gradients are
/// scaled by a rank-0 clip coefficient (%a12); step %a13, lr %a14.
std::string adamwClipModule(const std::string &attrs) {
  std::vector<std::string> shapes = {"tensor<7xf32>", "tensor<1024xf32>",
                                     "tensor<96x32xf32>"};
  std::vector<std::string> args;
  for (const std::string &s : shapes)
    for (int k = 0; k < 4; ++k)
      args.push_back(s);
  args.insert(args.end(), {"tensor<f32>", "tensor<i64>", "tensor<f32>"});
  std::string body;
  std::vector<std::pair<std::string, std::string>> yields;
  for (int u = 0; u < 3; ++u) {
    std::string U = std::to_string(u), T = shapes[u];
    auto a = [&](int k) { return "%a" + std::to_string(4 * u + k); };
    body += "    %c" + U + " = step.broadcast_in_dim %a12, dims = [] : "
            "tensor<f32> -> " + T + "\n";
    body += "    %g" + U + " = step.mul " + a(1) + ", %c" + U + " : " + T +
            "\n";
    body += "    %p" + U + ", %m" + U + ", %v" + U + " = step.adamw_update " +
            a(0) + ", %g" + U + ", " + a(2) + ", " + a(3) + ", %a13, %a14 " +
            attrs + " : " + T + ", tensor<i64>, tensor<f32>\n";
    for (const char *r : {"%p", "%m", "%v"})
      yields.push_back({r + U, T});
  }
  return fusionModule(args, body, yields);
}

//===----------------------------------------------------------------------===//
// Form A: optimizer updates
//===----------------------------------------------------------------------===//

TEST(MultiTensorKernels, AdamwWithClipPrologueIsOneSegmentedLaunch) {
  KernelSource ks = multiTensorKernel(
      adamwClipModule("{beta2 = 9.500000e-01 : f64, weight_decay = 1.000000e-01 : f64}"));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  // 7 elements: 1 scalar block; 1024: 256 vectors, 1 block; 3072: 768
  // vectors, 3 blocks.
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(ks.gridX, 5);
  EXPECT_EQ(ks.params.size(), 15u + 9u);
  EXPECT_EQ(count(s, "__global__"), 1);
  EXPECT_TRUE(contains(s, "// tensor 0: 7 elements, blocks [0, 1)\n")) << s;
  EXPECT_TRUE(contains(s, "// tensor 1: 1024 elements, blocks [1, 2), 4 per thread"));
  EXPECT_TRUE(contains(s, "// tensor 2: 3072 elements, blocks [2, 5), 4 per thread"));
  // The binary search over segment starts.
  EXPECT_TRUE(contains(s, "if (blockIdx.x < 1u)"));
  EXPECT_TRUE(contains(s, "if (blockIdx.x < 2u)"));
  // Tensors 1 and 2 (vectorized) share one copy of their code after the
  // dispatch, which only names it; tensor 0 (scalar) has its own, inline.
  EXPECT_TRUE(contains(s, "code = 0, seg = 1;\n"));
  EXPECT_TRUE(contains(s, "code = 0, seg = 2;\n"));
  EXPECT_TRUE(contains(s, "if (code == 0) { // tensors 1, 2\n"));
  EXPECT_FALSE(contains(s, "code == 1"));
  // Run-time step and lr of the fusion's inputs, once per code.
  EXPECT_EQ(count(s, "const double t = (double)in13[0];"), 1);
  EXPECT_EQ(count(s, "const double t = (double)sin1[0];"), 1);
  EXPECT_TRUE(contains(s, "const long long *const sin1 = in13;"));
  EXPECT_TRUE(contains(s, "const float *const sin2 = in14;"));
  // The clip coefficient is loaded once a code, before its loop.
  EXPECT_EQ(count(s, "in12[0]"), 1);
  EXPECT_TRUE(contains(s, "const float *const sin0 = in12;"));
  // The shared code's pointers and segment, each tensor's own.
  EXPECT_TRUE(contains(s, "case 1: sin3 = in4; sin4 = in5; sin5 = in6; "
                          "sin6 = in7; sout0 = out3; sout1 = out4; sout2 = "
                          "out5; segStart = 1u; segBlocks = 1; segWork = "
                          "256; break;"));
  EXPECT_TRUE(contains(s, "default: sin3 = in8; sin4 = in9; sin5 = in10; "
                          "sin6 = in11; sout0 = out6; sout1 = out7; sout2 = "
                          "out8; segStart = 2u; segBlocks = 3; segWork = "
                          "768; break;"));
  // Vector loads of params, moments and gradients in the shared code,
  // vector stores of their results; tensor 0 is scalar.
  for (const char *in : {"sin3", "sin4", "sin5", "sin6"})
    EXPECT_TRUE(contains(s, std::string("reinterpret_cast<const Vec<float, 4> *>(") +
                                in + ")[v]")) << in;
  EXPECT_FALSE(contains(s, "reinterpret_cast<const Vec<float, 4> *>(in1)"));
  EXPECT_TRUE(contains(s, "out0[i] = "));
  EXPECT_TRUE(contains(s, "reinterpret_cast<Vec<float, 4> *>(sout2)[v] = vy2;"));
  // The hyper-parameters baked in.
  EXPECT_TRUE(contains(s, "pow(0.94999999999999996, t)")) << s;
  expectCubinsForSm80AndSm90(ks);
}

TEST(MultiTensorKernels, AdamwArithmeticIsTheUnfusedKernels) {
  KernelSource fused = multiTensorKernel(adamwClipModule(""));
  KernelSource alone = firstKernel(R"(
func.func @f(%p: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>,
             %v: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) {
  %p1, %m1, %v1 = step.adamw_update %p, %g, %m, %v, %t, %lr : tensor<8xf32>, tensor<i64>, tensor<f32>
  return
}
)");
  ASSERT_FALSE(alone.source.empty());
  // Every line of the unfused per-element update appears in each code:
  // tensor 0's own, and the one tensors 1 and 2 share.
  for (const char *key : {"const float p = a0 * decay;", "const float m = ",
                          "const float v = ", "const float denom = ",
                          "r0 = p + negStepSize * m / denom;",
                          "const float negStepSize = "}) {
    size_t at = alone.source.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    std::string line =
        alone.source.substr(at, alone.source.find('\n', at) - at);
    EXPECT_EQ(count(fused.source, line), 2) << line;
  }
}

/// AdamW updates of f32 tensors of `sizes` (params, gradients and moments
/// %a0 ... %a<4K-1>), step %a<4K>, learning rates %a<4K+1> ... : tensor u
/// takes the last one when u + 1 == K and `lrs` is 2, else the first.
std::string adamwModule(const std::vector<int> &sizes, int lrs) {
  const int k = static_cast<int>(sizes.size());
  std::vector<std::string> args;
  for (int n : sizes)
    for (int j = 0; j < 4; ++j)
      args.push_back("tensor<" + std::to_string(n) + "xf32>");
  args.push_back("tensor<i64>");
  for (int l = 0; l < lrs; ++l)
    args.push_back("tensor<f32>");
  std::string body;
  std::vector<std::pair<std::string, std::string>> yields;
  for (int u = 0; u < k; ++u) {
    std::string U = std::to_string(u),
                T = "tensor<" + std::to_string(sizes[u]) + "xf32>";
    auto a = [&](int j) { return "%a" + std::to_string(4 * u + j); };
    int lr = 4 * k + 1 + (lrs == 2 && u + 1 == k ? 1 : 0);
    body += "    %p" + U + ", %m" + U + ", %v" + U + " = step.adamw_update " +
            a(0) + ", " + a(1) + ", " + a(2) + ", " + a(3) + ", %a" +
            std::to_string(4 * k) + ", %a" + std::to_string(lr) + " : " + T +
            ", tensor<i64>, tensor<f32>\n";
    for (const char *r : {"%p", "%m", "%v"})
      yields.push_back({r + U, T});
  }
  return fusionModule(args, body, yields);
}

// Updates whose code differs only in the pointers and segment are one
// copy of that code (GPT-2 124M's AdamW kernels: 48 tensors, 4 codes a
// kernel; NVRTC 2.2-3.0 s a cubin inlined, docs/codegen.md): sizes 1024,
// 7, 4096, 13, 2048 and 5 make two codes of three tensors (vectorized,
// scalar) and no inlined segment.
TEST(MultiTensorKernels, SegmentsOfEqualCodeShareOneCopy) {
  const std::vector<int> sizes = {1024, 7, 4096, 13, 2048, 5};
  const int k = static_cast<int>(sizes.size());
  KernelSource ks = multiTensorKernel(adamwModule(sizes, 1));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  EXPECT_TRUE(contains(s, "if (code == 0) { // tensors 0, 2, 4\n")) << s;
  EXPECT_TRUE(contains(s, "else if (code == 1) { // tensors 1, 3, 5\n"));
  EXPECT_EQ(count(s, "const float p = a0 * decay;"), 2);
  EXPECT_EQ(count(s, "pow(0.90000000000000002, t)"), 2);
  // Every segment only names its code; none is inlined.
  for (int u = 0; u < k; ++u)
    EXPECT_TRUE(contains(s, "code = " + std::to_string(u % 2) + ", seg = " +
                                std::to_string(u) + ";\n"))
        << u;
  EXPECT_FALSE(contains(s, "(double)in24[0]"));
  // Tensor 2's segment: 1024 vectors from block 2 (after 1 + 1 blocks).
  EXPECT_TRUE(contains(s, "case 2: sin2 = in8; sin3 = in9; sin4 = in10; "
                          "sin5 = in11; sout0 = out6; sout1 = out7; sout2 = "
                          "out8; segStart = 2u; segBlocks = 4; segWork = "
                          "1024; break;"));
  EXPECT_TRUE(contains(s, "default: sin2 = in20; sin3 = in21; sin4 = in22; "
                          "sin5 = in23; sout0 = out15; sout1 = out16; sout2 = "
                          "out17; segStart = 9u; segBlocks = 1; segWork = "
                          "5; break;"));
  expectCubinsForSm80AndSm90(ks);
}

// A pointer of a shared code's head that not every tensor passes alike
// (two learning rates) is bound by the switch before the head; the step,
// passed alike, without one.
TEST(MultiTensorKernels, ASharedHeadsPointersAreBoundPerTensor) {
  // Tensor 2 takes the second learning rate.
  KernelSource ks = multiTensorKernel(adamwModule({1024, 2048, 4096}, 2));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  EXPECT_TRUE(contains(s, "if (code == 0) { // tensors 0, 1, 2\n")) << s;
  EXPECT_TRUE(contains(s, "const long long *const sin0 = in12;"));
  EXPECT_TRUE(contains(s, "    const float *sin1;\n    switch (seg) {\n"
                          "    case 0: sin1 = in13; break;\n"
                          "    case 1: sin1 = in13; break;\n"
                          "    default: sin1 = in14; break;\n    }\n"
                          "    const double t = (double)sin0[0];"));
  EXPECT_EQ(count(s, "const double lr = (double)sin1[0];"), 1);
  expectCubinsForSm80AndSm90(ks);
}

TEST(MultiTensorKernels, SgdMomentumWithCastPrologue) {
  // Gradients arrive in bf16 and are cast to the f32 params' type.
  std::string body = R"(    %g0 = step.cast %a1 : tensor<10xbf16> -> tensor<10xf32>
    %p0, %b0 = step.sgd_update %a0, %g0, %a6, %a7 momentum_buffer %a2 {momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : (tensor<10xf32>, tensor<10xf32>, tensor<i64>, tensor<f32>, tensor<10xf32>) -> (tensor<10xf32>, tensor<10xf32>)
    %g1 = step.cast %a4 : tensor<64xbf16> -> tensor<64xf32>
    %p1, %b1 = step.sgd_update %a3, %g1, %a6, %a7 momentum_buffer %a5 {momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-02 : f64} : (tensor<64xf32>, tensor<64xf32>, tensor<i64>, tensor<f32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>)
)";
  KernelSource ks = multiTensorKernel(fusionModule(
      {"tensor<10xf32>", "tensor<10xbf16>", "tensor<10xf32>", "tensor<64xf32>",
       "tensor<64xbf16>", "tensor<64xf32>", "tensor<i64>", "tensor<f32>"},
      body,
      {{"%p0", "tensor<10xf32>"}, {"%b0", "tensor<10xf32>"},
       {"%p1", "tensor<64xf32>"}, {"%b1", "tensor<64xf32>"}}));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(ks.gridX, 2);
  EXPECT_TRUE(contains(s, "#include <cuda_bf16.h>"));
  EXPECT_TRUE(contains(s, "const long long t = in6[0];"));
  EXPECT_TRUE(contains(s, "const float negLr = -in7[0];"));
  EXPECT_TRUE(contains(s, "t == 1 ? d : a4 * 0.899999976f"));
  // The bf16 gradient of the vectorized tensor is one 8-byte vector load.
  EXPECT_TRUE(contains(s, "reinterpret_cast<const Vec<__nv_bfloat16, 4> *>(in4)[v]"));
  EXPECT_TRUE(contains(s, "__bfloat162float(in1[i])")) << s;
  EXPECT_TRUE(contains(s, "out1[i] = r1;"));
  EXPECT_TRUE(contains(s, "vy3.v[e] = r1;"));
  expectCubinsForSm80AndSm90(ks);
}

TEST(MultiTensorKernels, LambIsRefused) {
  std::string body =
      "    %p, %m, %v = step.lamb_update %a0, %a1, %a2, %a3, %a4, %a5 : "
      "tensor<8xf32>, tensor<i64>, tensor<f32>\n";
  std::string text = fusionModule(
      {"tensor<8xf32>", "tensor<8xf32>", "tensor<8xf32>", "tensor<8xf32>",
       "tensor<i64>", "tensor<f32>"},
      body,
      {{"%p", "tensor<8xf32>"}, {"%m", "tensor<8xf32>"},
       {"%v", "tensor<8xf32>"}});
  try {
    multiTensorKernel(text);
    ADD_FAILURE() << "a LAMB multi_tensor fusion was accepted";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "lamb_update is not supported")) << e.what();
  }
}

TEST(MultiTensorKernels, TooManyPointersForTheParameterSpaceThrow) {
  // 260 updates: 522 inputs + 260 results = 782 pointers, 6256 bytes.
  std::vector<std::string> args;
  std::string body;
  std::vector<std::pair<std::string, std::string>> yields;
  const int k = 260;
  for (int u = 0; u < k; ++u)
    args.insert(args.end(), {"tensor<4xf32>", "tensor<4xf32>"});
  args.insert(args.end(), {"tensor<i64>", "tensor<f32>"});
  std::string t = "%a" + std::to_string(2 * k),
              lr = "%a" + std::to_string(2 * k + 1);
  for (int u = 0; u < k; ++u) {
    std::string U = std::to_string(u);
    body += "    %p" + U + " = step.sgd_update %a" + std::to_string(2 * u) +
            ", %a" + std::to_string(2 * u + 1) + ", " + t + ", " + lr +
            " : (tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>) -> "
            "tensor<4xf32>\n";
    yields.push_back({"%p" + U, "tensor<4xf32>"});
  }
  try {
    multiTensorKernel(fusionModule(args, body, yields));
    ADD_FAILURE() << "6256 bytes of parameters were accepted";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "6256 bytes of kernel parameters"))
        << e.what();
  }
}

TEST(MultiTensorKernels, AResultThatIsNoUpdatesThrows) {
  std::string body = R"(    %g = step.mul %a1, %a1 : tensor<8xf32>
    %p = step.sgd_update %a0, %g, %a2, %a3 : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
)";
  std::string text = fusionModule(
      {"tensor<8xf32>", "tensor<8xf32>", "tensor<i64>", "tensor<f32>"}, body,
      {{"%p", "tensor<8xf32>"}, {"%g", "tensor<8xf32>"}});
  EXPECT_THROW(multiTensorKernel(text), step::rt::Error);
}

//===----------------------------------------------------------------------===//
// Form C: per-element maps (step-fuse's casts of the parameters)
//===----------------------------------------------------------------------===//

TEST(MultiTensorKernels, ParameterCastsAreOneSegmentedLaunch) {
  // Casts of 768x2304 (vectorized) and 2303 elements to bf16, and of 7 to
  // f16: a segment each, the unfused cast's rounding store.
  std::string body =
      R"(    %c0 = step.cast %a0 : tensor<768x2304xf32> -> tensor<768x2304xbf16>
    %c1 = step.cast %a1 : tensor<2303xf32> -> tensor<2303xbf16>
    %c2 = step.cast %a2 : tensor<7xf32> -> tensor<7xf16>
)";
  KernelSource ks = multiTensorKernel(fusionModule(
      {"tensor<768x2304xf32>", "tensor<2303xf32>", "tensor<7xf32>"}, body,
      {{"%c0", "tensor<768x2304xbf16>"},
       {"%c1", "tensor<2303xbf16>"},
       {"%c2", "tensor<7xf16>"}}));
  EXPECT_EQ(ks.params, (std::vector<std::string>{"in0", "in1", "in2", "out0",
                                                 "out1", "out2"}));
  // 442368 vectors of 4 in 1728 blocks; 2303 elements in 9; 7 in 1.
  EXPECT_TRUE(contains(ks.source, "// tensor 0: 1769472 elements, blocks "
                                  "[0, 1728), 4 per thread"));
  EXPECT_TRUE(contains(ks.source, "// tensor 1: 2303 elements, blocks "
                                  "[1728, 1737)\n"));
  EXPECT_TRUE(contains(ks.source, "// tensor 2: 7 elements, blocks "
                                  "[1737, 1738)\n"));
  EXPECT_EQ(ks.gridX, 1738);
  EXPECT_TRUE(contains(ks.source, "y0.v[e] = __float2bfloat16_rn(r0);"));
  EXPECT_TRUE(contains(ks.source, "out1[i] = __float2bfloat16_rn(r0);"));
  EXPECT_TRUE(contains(ks.source, "out2[i] = __float2half_rn(r0);"));
  expectCubinsForSm80AndSm90(ks);
}

TEST(MultiTensorKernels, AMapOfIntegersIsRefused) {
  std::string body = R"(    %c0 = step.cast %a0 : tensor<8xi64> -> tensor<8xf32>
    %c1 = step.cast %a1 : tensor<8xf32> -> tensor<8xbf16>
)";
  try {
    multiTensorKernel(
        fusionModule({"tensor<8xi64>", "tensor<8xf32>"}, body,
                     {{"%c0", "tensor<8xf32>"}, {"%c1", "tensor<8xbf16>"}}));
    ADD_FAILURE() << "no error";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "is no per-element map of float operands"))
        << e.what();
  }
}

TEST(MultiTensorKernels, OtherOpsAreNotThisFamilys) {
  Parsed p = parse(R"(
func.func @f(%a: tensor<4xf32>) {
  %0 = step.neg %a : tensor<4xf32>
  %1 = step.fusion "loop" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %y = step.relu %x : tensor<4xf32>
    step.yield %y : tensor<4xf32>
  }
  return
}
)");
  ASSERT_TRUE(p.module);
  for (mlir::Operation &op : p.func().getBody().front())
    EXPECT_FALSE(detail::emitMultiTensorFamily(&op, "k").has_value());
}

//===----------------------------------------------------------------------===//
// Form B: full reductions and a scalar epilogue
//===----------------------------------------------------------------------===//

/// The clip-by-global-norm computation of three gradients (7 f32, 4096
/// bf16 cast to f32, 100000 f32 as 100x1000): %a3 = 0, %a4 = eps,
/// %a5 = max norm, %a6 = 1.
std::string normModule(const std::string &dims2) {
  std::string body = R"(    %q0 = step.mul %a0, %a0 : tensor<7xf32>
    %s0 = step.reduce_sum %q0 dims = [0] : tensor<7xf32> -> tensor<f32>
    %c1 = step.cast %a1 : tensor<4096xbf16> -> tensor<4096xf32>
    %q1 = step.mul %c1, %c1 : tensor<4096xf32>
    %s1 = step.reduce_sum %q1 dims = [0] : tensor<4096xf32> -> tensor<f32>
    %q2 = step.mul %a2, %a2 : tensor<100x1000xf32>
    %s2 = step.reduce_sum %q2 dims = )" +
                     dims2 + R"( : tensor<100x1000xf32> -> T2
    %t0 = step.add %a3, %s0 : tensor<f32>
    %t1 = step.add %t0, %s1 : tensor<f32>
    %t2 = step.add %t1, %s2 : tensor<f32>
    %n = step.sqrt %t2 : tensor<f32>
    %d = step.add %n, %a4 : tensor<f32>
    %r = step.div %a5, %d : tensor<f32>
    %k = step.min %r, %a6 : tensor<f32>
)";
  std::string t2 = dims2 == "[0, 1]" ? "tensor<f32>" : "tensor<100xf32>";
  body.replace(body.find("T2"), 2, t2);
  if (t2 != "tensor<f32>") // keep the body well typed: a row sum
    body.replace(body.find("%t2 = step.add %t1, %s2"), 23,
                 "%t2 = step.add %t1, %t1");
  return fusionModule({"tensor<7xf32>", "tensor<4096xbf16>",
                       "tensor<100x1000xf32>", "tensor<f32>", "tensor<f32>",
                       "tensor<f32>", "tensor<f32>"},
                      body, {{"%n", "tensor<f32>"}, {"%k", "tensor<f32>"}});
}

TEST(MultiTensorKernels, GlobalNormIsOneDeterministicLaunch) {
  KernelSource ks = multiTensorKernel(normModule("[0, 1]"));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  // 7 and 4096 elements: one chunk each; 100000: 13 chunks of 7696.
  EXPECT_EQ(ks.gridX, 15);
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(s, "__device__ float k_partial[15];"));
  EXPECT_TRUE(contains(s, "__device__ unsigned int k_ticket;"));
  EXPECT_TRUE(contains(s, "amLast = atomicAdd(&k_ticket, 1u) == 15 - 1;"));
  EXPECT_TRUE(contains(s, "k_ticket = 0;"));
  EXPECT_TRUE(contains(s, "// tensor 2: 100000 elements in 13 chunks of 7696, 4 per thread"))
      << s;
  EXPECT_TRUE(contains(s, "// tensor 0: 7 elements in 1 chunks of 8\n"));
  // The bf16 gradient: vector loads, widened, squared in f32.
  EXPECT_TRUE(contains(s, "reinterpret_cast<const Vec<__nv_bfloat16, 4> *>(in1)[v]"));
  // Partials combined per tensor in a fixed order (one loop over the
  // tensors and a table of their first partials), then the epilogue.
  EXPECT_TRUE(contains(s, "__device__ const unsigned int k_start[4] = {0u, "
                          "1u, 2u, 15u};"));
  EXPECT_TRUE(contains(s, "for (unsigned j = k_start[u] + threadIdx.x; j < "
                          "k_start[u + 1]; j += blockDim.x)\n      q += "
                          "part[j];"));
  EXPECT_EQ(count(s, "blockReduce(q, SumOp(), 0.0f, sh)"), 1);
  EXPECT_TRUE(contains(s, "const float sum2 = tot_[2];"));
  EXPECT_LT(s.find("sum0 ="), s.find("sum1 ="));
  EXPECT_LT(s.find("sum2 ="), s.find("sqrtf("));
  EXPECT_TRUE(contains(s, "out0[0] = "));
  EXPECT_TRUE(contains(s, "out1[0] = "));
  EXPECT_FALSE(contains(s, "atomicAdd(&k_partial")); // no float atomics
  expectCubinsForSm80AndSm90(ks);
}

TEST(MultiTensorKernels, APartialReductionIsRefused) {
  EXPECT_THROW(multiTensorKernel(normModule("[1]")), step::rt::Error);
}

} // namespace
