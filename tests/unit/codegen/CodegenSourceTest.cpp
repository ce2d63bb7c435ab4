//===- CodegenSourceTest.cpp - What each op family's kernel bakes in ------===//
//
// Per op family: the launch description (grid, block, shared memory,
// parameter order) and the constants and strategy the emitted source holds.
// The dropout test checks the integer keep test against the CPU reference
// mask (runtime/cpu/Kernels.h) for the threshold parsed from the source.
// NvrtcTest.cpp compiles the same kernels.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"

#include <regex>

namespace {
using namespace step::codegen;
using namespace step::codegen::test;

/// A column sum: reduce_sum over dim 0 of a [rows, cols] tensor of `dt`.
std::string colSum(int64_t rows, int64_t cols, const std::string &dt) {
  std::string in = "tensor<" + std::to_string(rows) + "x" +
                   std::to_string(cols) + "x" + dt + ">",
              out = "tensor<" + std::to_string(cols) + "x" + dt + ">";
  return fn("%a: " + in, "step.reduce_sum %a dims = [0] : " + in + " -> " + out,
            out);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(ElementwiseKernels, VectorizedBinaryBakesTheSizeIn) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<4x8xf32>, %b: tensor<4x8xf32>",
         "step.add %a, %b : tensor<4x8xf32>", "tensor<4x8xf32>"),
      "add_k");
  EXPECT_EQ(ks.name, "add_k");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0"}));
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(ks.gridX, 1); // 32 elements = 8 float4 vectors
  EXPECT_EQ(ks.sharedBytes, 0);
  EXPECT_TRUE(contains(ks.source, "extern \"C\" __global__"));
  EXPECT_TRUE(contains(ks.source, "add_k(const float *in0, const float *in1, "
                                  "float *out0)"));
  EXPECT_TRUE(contains(ks.source, "Vec<float, 4>"));
  EXPECT_TRUE(contains(ks.source, "v < 8;")); // vectors, not elements
  EXPECT_TRUE(contains(ks.source, "r0 = a0 + a1;"));
  EXPECT_FALSE(contains(ks.source, "cuda_fp16.h")); // f32 only
}

TEST(ElementwiseKernels, ScalarLoopWhenTheSizeIsNotAMultipleOf4) {
  KernelSource ks = firstKernel(fn("%a: tensor<3x5xf32>",
                                   "step.exp %a : tensor<3x5xf32>",
                                   "tensor<3x5xf32>"));
  EXPECT_FALSE(contains(ks.source, "Vec<"));
  EXPECT_TRUE(contains(ks.source, "v < 15;"));
  EXPECT_TRUE(contains(ks.source, "expf(a0)"));
}

TEST(ElementwiseKernels, GridIsCappedForGridStrideLoops) {
  KernelSource ks = firstKernel(fn("%a: tensor<4096x4096xf32>",
                                   "step.relu %a : tensor<4096x4096xf32>",
                                   "tensor<4096x4096xf32>"));
  EXPECT_EQ(ks.gridX, 4096); // 4M vectors / 256 threads would be 16384
  EXPECT_TRUE(contains(ks.source, "v < 4194304;"));
}

TEST(ElementwiseKernels, HalfTypesComputeInF32AndRoundOnStore) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<8xbf16>",
         "step.gelu %a approximate tanh : tensor<8xbf16>", "tensor<8xbf16>"));
  EXPECT_TRUE(contains(ks.source, "#include <cuda_bf16.h>"));
  EXPECT_TRUE(contains(ks.source, "__bfloat162float(x0.v[e])"));
  EXPECT_TRUE(contains(ks.source, "__float2bfloat16_rn(r0)"));
  EXPECT_TRUE(contains(ks.source, "0.044715f"));
  ks = firstKernel(fn("%a: tensor<8xf16>", "step.rsqrt %a : tensor<8xf16>",
                      "tensor<8xf16>"));
  EXPECT_TRUE(contains(ks.source, "#include <cuda_fp16.h>"));
  EXPECT_TRUE(contains(ks.source, "1.0f / sqrtf(a0)")); // not rsqrtf
}

TEST(ElementwiseKernels, IntegerOpsWrapAndCompareSelectCast) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<4xi64>, %b: tensor<4xi64>",
         "step.mul %a, %b : tensor<4xi64>", "tensor<4xi64>"));
  EXPECT_TRUE(contains(ks.source, "(unsigned long long)a0 * (unsigned long "
                                  "long)a1"));
  EXPECT_FALSE(contains(ks.source, "Vec<")); // 8-byte elements stay scalar
  ks = firstKernel(fn("%a: tensor<4xf32>, %b: tensor<4xf32>",
                      "step.compare lt, %a, %b : tensor<4xf32>",
                      "tensor<4xi1>"));
  EXPECT_TRUE(contains(ks.source, "unsigned char *out0"));
  EXPECT_TRUE(contains(ks.source, "(a0 < a1) ? 1 : 0"));
  ks = firstKernel(
      fn("%p: tensor<4xi1>, %a: tensor<4xf16>, %b: tensor<4xf16>",
         "step.select %p, %a, %b : tensor<4xi1>, tensor<4xf16>",
         "tensor<4xf16>"));
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "in2", "out0"}));
  EXPECT_TRUE(contains(ks.source, "r0 = a0 ? a1 : a2;"));
  ks = firstKernel(fn("%a: tensor<4xf32>",
                      "step.cast %a : tensor<4xf32> -> tensor<4xi32>",
                      "tensor<4xi32>"));
  EXPECT_TRUE(contains(ks.source, "__float2int_rz(a0)"));
}

TEST(ElementwiseKernels, DropoutMaskMatchesTheCpuReference) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<64x32xf32>",
         "step.dropout %a p = 2.500000e-01 seed = 42 : tensor<64x32xf32>",
         "tensor<64x32xf32>"));
  EXPECT_TRUE(contains(ks.source, "splitmix64(42ull ^ splitmix64("));
  EXPECT_TRUE(contains(ks.source, "a0 * 1.33333337f")); // float(1 / 0.75)
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ks.source, m,
                                std::regex("bits >= ([0-9]+)ull")));
  uint64_t threshold = std::stoull(m[1]);
  EXPECT_EQ(threshold, 4194304u); // 0.25 * 2^24
  // The integer test the kernel uses keeps exactly the CPU's elements.
  for (double p : {0.25, 0.1, 1.0 / 3.0, 0.9}) {
    auto t = static_cast<uint64_t>(std::ceil(std::ldexp(p, 24)));
    for (uint64_t i = 0; i < 20000; ++i) {
      using namespace step::rt::cpu;
      uint64_t bits = splitmix64(42 ^ splitmix64(i)) >> 40;
      ASSERT_EQ(bits >= t, dropoutKeep(42, i, p)) << "p " << p << " i " << i;
    }
  }
}

// With an offset (the step counter): read once before the loop, mixed into
// the key as runtime/cpu dropoutKey does.
TEST(ElementwiseKernels, DropoutOffsetIsReadOnceAndKeysTheMask) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<64x32xf32>, %t: tensor<i64>",
         "step.dropout %a offset %t p = 2.500000e-01 seed = 42 : "
         "tensor<64x32xf32>, tensor<i64>",
         "tensor<64x32xf32>"));
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0"}));
  size_t read = ks.source.find("const long long a1 = in1[0];");
  ASSERT_NE(read, std::string::npos);
  EXPECT_LT(read, ks.source.find("for ("));
  EXPECT_TRUE(contains(ks.source, "splitmix64((42ull + (unsigned long "
                                  "long)a1 * 0x9e3779b97f4a7c15ull) ^ "
                                  "splitmix64("));
  // NvrtcTest compiles it (allOps).
}

TEST(ElementwiseKernels, CopiesAndNoKernelOps) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<4x8xi64>",
         "step.reshape %a : tensor<4x8xi64> -> tensor<32xi64>",
         "tensor<32xi64>"));
  EXPECT_TRUE(contains(ks.source, "r0 = a0;"));
  Parsed p = parse(R"(
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %c = step.constant dense<1.0> : tensor<2x4xf32>
  %m = step.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %r = step.add %m, %c : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
)");
  std::vector<KernelSource> all = emitFunctionKernels(p.func());
  ASSERT_EQ(all.size(), 1u); // constant, matmul and return need none
  EXPECT_EQ(all[0].name.rfind("add_", 0), 0u);
  EXPECT_TRUE(contains(all[0].source, all[0].name + "("));
}

TEST(ElementwiseKernels, DynamicShapesAreRejected) {
  Parsed p = parse(fn("%a: tensor<?x4xf32>", "step.neg %a : tensor<?x4xf32>",
                      "tensor<?x4xf32>"));
  mlir::Operation &op = p.func().getBody().front().front();
  try {
    emitKernel(&op, "k");
    FAIL() << "expected rt::Error";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "static shapes")) << e.what();
  }
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

TEST(ShapeKernels, StridesAndOffsetsAreConstants) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<2x3x4xf32>",
         "step.transpose %a, perm = [0, 2, 1] : tensor<2x3x4xf32> -> "
         "tensor<2x4x3xf32>",
         "tensor<2x4x3xf32>"));
  EXPECT_EQ(ks.params, (Params{"in0", "out0"}));
  // Output [2, 4, 3]: the last output dim walks input stride 4, the middle
  // one stride 1, the first 12.
  EXPECT_TRUE(
      contains(ks.source, "r / 3; src += (decltype(src))(r - q * 3) * 4;"));
  EXPECT_TRUE(
      contains(ks.source, "r / 4; src += (decltype(src))(r - q * 4) * 1;"));
  EXPECT_TRUE(contains(ks.source, "src += (decltype(src))r * 12;"));
  EXPECT_TRUE(contains(ks.source, "o < 24;"));

  ks = firstKernel(fn("%a: tensor<16xf32>",
                      "step.broadcast_in_dim %a, dims = [1] : tensor<16xf32> "
                      "-> tensor<8x16xf32>",
                      "tensor<8x16xf32>"));
  EXPECT_TRUE(contains(ks.source, "src += (decltype(src))(r - q * 16) * 1;"));
  EXPECT_FALSE(contains(ks.source, "src += (decltype(src))r *")); // stride 0

  ks = firstKernel(fn("%a: tensor<4x8xf32>",
                      "step.slice %a start = [1, 2] limit = [4, 8] strides "
                      "= [1, 2] : tensor<4x8xf32> -> tensor<3x3xf32>",
                      "tensor<3x3xf32>"));
  EXPECT_TRUE(contains(ks.source, "long long src = 10;")); // 1 * 8 + 2
  EXPECT_TRUE(contains(ks.source, "(r - q * 3) * 2;"));
}

TEST(ShapeKernels, PadConcatIotaEmbedding) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<2x3xf32>",
         "step.pad %a low = [0, 1] high = [2, 0] value = 1.5 : tensor<2x3xf32>"
         " -> tensor<4x4xf32>",
         "tensor<4x4xf32>"));
  EXPECT_TRUE(contains(ks.source, "if (c < 1 || c >= 4) inside = false"));
  EXPECT_TRUE(contains(ks.source, "(float)(1.5)"));

  ks = firstKernel(fn("%a: tensor<2x3xf32>, %b: tensor<4x3xf32>",
                      "step.concat %a, %b dim = 0 : tensor<2x3xf32>, "
                      "tensor<4x3xf32> -> tensor<6x3xf32>",
                      "tensor<6x3xf32>"));
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0"}));
  EXPECT_TRUE(contains(ks.source, "if (c < 2)"));
  EXPECT_TRUE(contains(ks.source, "else if (c < 6)"));
  EXPECT_TRUE(contains(ks.source, "out0[o] = in1[src]"));

  ks = firstKernel(fn("", "step.iota dim = 1 : tensor<3x5xi64>",
                      "tensor<3x5xi64>"));
  EXPECT_EQ(ks.params, (Params{"out0"}));
  EXPECT_TRUE(contains(ks.source, "(r / 1) % 5"));

  ks = firstKernel(fn("%i: tensor<4x16xi32>, %w: tensor<100x32xf32>",
                      "step.embedding %i, %w : tensor<4x16xi32>, "
                      "tensor<100x32xf32> -> tensor<4x16x32xf32>",
                      "tensor<4x16x32xf32>"));
  EXPECT_TRUE(contains(ks.source, "typedef Vec<float, 4> V4;"));
  EXPECT_TRUE(contains(ks.source, "idx >= 100"));
  EXPECT_TRUE(contains(ks.source, "o / 8")); // D / 4 vectors per row
  EXPECT_EQ(ks.gridX, 2);                     // 512 vectors / 256
}

//===----------------------------------------------------------------------===//
// Reductions and row kernels
//===----------------------------------------------------------------------===//

TEST(ReduceKernels, StrategyFollowsTheReducedDims) {
  // Innermost reduced, rows of at most 1024: a warp per output row, 8
  // rows per block, warp shuffles only.
  KernelSource ks = firstKernel(
      fn("%a: tensor<64x100xf32>",
         "step.reduce_sum %a dims = [1] : tensor<64x100xf32> -> tensor<64xf32>",
         "tensor<64xf32>"));
  EXPECT_EQ(ks.gridX, 8);
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(acc, SumOp()"));
  EXPECT_TRUE(contains(ks.source, "row0_ + (threadIdx.x >> 5)"));
  EXPECT_TRUE(contains(ks.source, "__shfl_xor_sync"));
  // Longer rows: a block per row, block sized to the row (at most 256).
  ks = firstKernel(
      fn("%a: tensor<5x3000xf32>",
         "step.reduce_sum %a dims = [1] : tensor<5x3000xf32> -> tensor<5xf32>",
         "tensor<5xf32>"));
  EXPECT_EQ(ks.gridX, 5);
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(ks.source, "rowReduce<false>(acc, SumOp()"));
  // Innermost kept (a bias gradient): 32 outputs x 8 lanes per block.
  ks = firstKernel(colSum(64, 100, "f32"));
  EXPECT_EQ(ks.gridX, 4);
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(ks.source, "sh[8][33]"));
  EXPECT_FALSE(contains(ks.source, "ticket")); // 64 rows: too few to cut
  // Few outputs over many rows (a layer-norm weight gradient): row chunks
  // of a multiple of 8 rows, a block per (128 outputs, chunk), each lane 4
  // adjacent outputs read as one vector, partials combined in a fixed
  // order by the last block of each tile. 1 tile: min(1024 / 1, 1000 /
  // 64) = 15 wanted, so chunks of 72 rows, 14 of them.
  ks = firstKernel(colSum(1000, 100, "bf16"), "colsum");
  EXPECT_EQ(ks.gridX, 1 * 14);
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(
      contains(ks.source, "__device__ float colsum_partial0[14 * 100];"));
  EXPECT_TRUE(contains(ks.source, "__device__ unsigned int colsum_ticket[1];"));
  EXPECT_TRUE(contains(ks.source, "t = blockIdx.x % 1, s = blockIdx.x / 1;"));
  EXPECT_TRUE(contains(ks.source, "o4 = t * 128 + tx * 4;"));
  EXPECT_TRUE(contains(ks.source, "reinterpret_cast<const Vec<__nv_bfloat16, "
                                  "4> *>(in0)[off4 / 4]"));
  EXPECT_TRUE(contains(ks.source, "(s + 1) * 72 < 1000"));
  EXPECT_TRUE(
      contains(ks.source, "atomicAdd(&colsum_ticket[t], 1u) == 14 - 1"));
  EXPECT_TRUE(contains(ks.source, "for (int c = ty; c < 14; c += 8)"));
  EXPECT_TRUE(contains(ks.source, "colsum_ticket[t] = 0;"));
  EXPECT_FALSE(contains(ks.source, "atomicAdd(&out")); // no float atomics
  expectCubinsForSm80AndSm90(ks);
  // 33 outputs (not a multiple of 4): a lane per output, 2 tiles of 32.
  ks = firstKernel(colSum(1000, 33, "f32"), "colsum");
  EXPECT_EQ(ks.gridX, 2 * 7);
  EXPECT_TRUE(contains(ks.source, "o4 = t * 32 + tx * 1;"));
  EXPECT_FALSE(contains(ks.source, "Vec<"));
  EXPECT_TRUE(contains(ks.source, "float acc0_[1];"));
  // 2^16 rows of 40000 (2.6e9 elements): 32-bit coordinates, 64-bit
  // offsets, so the row's offset is a 64-bit product.
  ks = firstKernel(colSum(65536, 40000, "f32"));
  EXPECT_TRUE(contains(ks.source, "int r = kk;")) << ks.source;
  EXPECT_TRUE(contains(ks.source, "off4 += (decltype(off4))r * 40000;"));
  // Enough outputs to fill the GPU alone: the one-pass kernel (40001: not
  // a multiple of 4, so 1251 tiles of 32 outputs).
  ks = firstKernel(colSum(1000, 40001, "f32"));
  EXPECT_EQ(ks.gridX, 1251);
  EXPECT_FALSE(contains(ks.source, "ticket"));
  // Everything into one value: split over blocks, combined by the last.
  ks = firstKernel(
      fn("%a: tensor<512x256xf32>",
         "step.reduce_sum %a dims = [0, 1] : tensor<512x256xf32> -> "
         "tensor<f32>",
         "tensor<f32>"),
      "gnorm");
  EXPECT_EQ(ks.gridX, 8); // 131072 / 16384
  EXPECT_TRUE(contains(ks.source, "__device__ float gnorm_partial[1 * 8];"));
  EXPECT_TRUE(contains(ks.source, "atomicAdd(&gnorm_ticket[o], 1u)"));
  EXPECT_TRUE(contains(ks.source, "kk < end")); // dims merged into one
}

TEST(ReduceKernels, MeanMaxAndIntegerSums) {
  KernelSource ks = firstKernel(
      fn("%a: tensor<8x256xbf16>",
         "step.reduce_mean %a dims = [1] keepdim : tensor<8x256xbf16> -> "
         "tensor<8x1xbf16>",
         "tensor<8x1xbf16>"));
  EXPECT_TRUE(contains(ks.source, "acc / 256.0f"));
  EXPECT_TRUE(contains(ks.source, "float acc"));
  ks = firstKernel(
      fn("%a: tensor<8x16xf32>",
         "step.reduce_max %a dims = [1] : tensor<8x16xf32> -> tensor<8xf32>",
         "tensor<8xf32>"));
  EXPECT_TRUE(contains(ks.source, "MaxNaNOp()"));
  EXPECT_TRUE(contains(ks.source, "__int_as_float(0xff800000)")); // -inf
  ks = firstKernel(
      fn("%a: tensor<8x16xi32>",
         "step.reduce_sum %a dims = [1] : tensor<8x16xi32> -> tensor<8xi32>",
         "tensor<8xi32>"));
  EXPECT_TRUE(contains(ks.source, "unsigned int acc"));
}

TEST(ReduceKernels, SoftmaxAndLayerNorm) {
  KernelSource ks = firstKernel(fn("%a: tensor<6x10xf32>",
                                   "step.log_softmax %a dim = 1 : "
                                   "tensor<6x10xf32>",
                                   "tensor<6x10xf32>"));
  EXPECT_EQ(ks.gridX, 1); // 6 rows of 10: a warp each, 8 per block
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(mx, MaxNaNOp()"));
  EXPECT_TRUE(contains(ks.source, "x - mx - lse"));
  ks = firstKernel(fn("%a: tensor<4x6x5xf32>",
                      "step.softmax %a dim = 1 : tensor<4x6x5xf32>",
                      "tensor<4x6x5xf32>"));
  EXPECT_EQ(ks.gridX, 3); // 4 * 5 rows, each strided by 5
  EXPECT_TRUE(contains(ks.source, "row % 5"));
  EXPECT_TRUE(contains(ks.source, "expf(x - mx) / sum"));
  ks = firstKernel(
      fn("%x: tensor<4x8x32xf16>, %w: tensor<32xf16>, %b: tensor<32xf16>",
         "step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8x32xf16>, "
         "tensor<32xf16>, tensor<32xf16>",
         "tensor<4x8x32xf16>"));
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "in2", "out0"}));
  EXPECT_EQ(ks.gridX, 4); // 32 rows, 8 per block
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(q, SumOp()"));
  EXPECT_TRUE(contains(ks.source, "var + 9.99999975e-06f"));
  EXPECT_TRUE(contains(ks.source, "/ 32.0f"));
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

TEST(TrainKernels, AdamwReadsStepAndLrOnce) {
  Parsed p = parse(R"(
func.func @f(%p: tensor<64xf32>, %g: tensor<64xf32>, %m: tensor<64xf32>,
             %v: tensor<64xf32>, %t: tensor<i64>, %lr: tensor<f32>)
    -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %p1, %m1, %v1 = step.adamw_update %p, %g, %m, %v, %t, %lr {weight_decay = 1.0e-01 : f64} : tensor<64xf32>, tensor<i64>, tensor<f32>
  return %p1, %m1, %v1 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}
)");
  auto ks = emitKernel(&p.func().getBody().front().front(), "adamw");
  ASSERT_TRUE(ks);
  EXPECT_EQ(ks->params,
            (Params{"in0", "in1", "in2", "in3", "in4", "in5", "out0", "out1",
                    "out2"}));
  EXPECT_TRUE(contains(ks->source, "const double t = (double)in4[0];"));
  EXPECT_TRUE(contains(ks->source, "pow(0.90000000000000002, t)"));
  EXPECT_TRUE(contains(ks->source, "lr * 0.10000000000000001"));
  EXPECT_TRUE(contains(ks->source, "a3 * 0.999000013f + 0.00100000005f"));
  EXPECT_TRUE(contains(ks->source, "+ 9.99999994e-09f")); // eps
  EXPECT_TRUE(contains(ks->source, "Vec<float, 4>"));
}

TEST(TrainKernels, LambIsOneBlockAndSgdHasMomentum) {
  Parsed p = parse(R"(
func.func @f(%p: tensor<1000xf32>, %g: tensor<1000xf32>, %m: tensor<1000xf32>,
             %v: tensor<1000xf32>, %t: tensor<i64>, %lr: tensor<f32>)
    -> (tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>) {
  %p1, %m1, %v1 = step.lamb_update %p, %g, %m, %v, %t, %lr : tensor<1000xf32>, tensor<i64>, tensor<f32>
  return %p1, %m1, %v1 : tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>
}
func.func @g(%p: tensor<8xf32>, %g: tensor<8xf32>, %t: tensor<i64>,
             %lr: tensor<f32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %p1, %b1 = step.sgd_update %p, %g, %t, %lr momentum_buffer %b {momentum = 9.000000e-01 : f64, nesterov} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %p1, %b1 : tensor<8xf32>, tensor<8xf32>
}
)");
  auto lamb = emitKernel(&p.func("f").getBody().front().front(), "lamb");
  ASSERT_TRUE(lamb);
  EXPECT_EQ(lamb->gridX, 1);
  EXPECT_EQ(lamb->blockX, 1024);
  EXPECT_TRUE(contains(lamb->source, "__shared__ double sh[32];"));
  EXPECT_TRUE(contains(lamb->source, "+ 9.99999997e-07f")); // eps 1e-6
  auto sgd = emitKernel(&p.func("g").getBody().front().front(), "sgd");
  ASSERT_TRUE(sgd);
  EXPECT_EQ(sgd->params,
            (Params{"in0", "in1", "in2", "in3", "in4", "out0", "out1"}));
  EXPECT_TRUE(contains(sgd->source, "t == 1 ? d : a4 * 0.899999976f"));
  EXPECT_TRUE(contains(sgd->source, "d = d + 0.899999976f * buf;"));
  EXPECT_FALSE(contains(sgd->source, "* a0;\n")); // weight decay 0: skipped
}

} // namespace
