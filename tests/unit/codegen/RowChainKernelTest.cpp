//===- RowChainKernelTest.cpp - Kernels of row chains and loop reductions -===//
//
// Hand-written fusions in the shapes step-fuse-row-chains and
// step-fuse-loop-reductions produce (docs/codegen.md, "row_chain fusions"
// and the reduction contract's per-element results): what each kernel must
// hold (its stages, the reduce kernels' row mapping, where results are
// stored) and that NVRTC compiles it for sm_80 and sm_90. The numerics run
// on the CPU in codegen.cuda_emulation_reduce.
//
//===----------------------------------------------------------------------===//
#include "FusionTestUtil.h"

#include "compiler/codegen/Emitters.h"
#include "runtime/Tensor.h"

namespace {
using namespace step::codegen;
using namespace step::codegen::test;

//===----------------------------------------------------------------------===//
// row_chain
//===----------------------------------------------------------------------===//

/// Layer norm's backward as step-fuse-row-chains merges it (77 rows of 96:
/// a warp per row, the last block partly past the end).
const char *kLnGradChain =
    R"(step.fusion "row_chain" (%x, %e, %dy, %w) : (tensor<77x96xf32>, tensor<f32>, tensor<77x96xbf16>, tensor<96xf32>) -> (tensor<77xf32>, tensor<77x96xf32>, tensor<77x96xbf16>) {
  ^bb0(%a: tensor<77x96xf32>, %eps: tensor<f32>, %g: tensor<77x96xbf16>, %gamma: tensor<96xf32>):
    %0 = step.reduce_mean %a dims = [1] : tensor<77x96xf32> -> tensor<77xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<77xf32> -> tensor<77x96xf32>
    %2 = step.sub %a, %1 : tensor<77x96xf32>
    %3 = step.mul %2, %2 : tensor<77x96xf32>
    %4 = step.reduce_mean %3 dims = [1] : tensor<77x96xf32> -> tensor<77xf32>
    %5 = step.broadcast_in_dim %eps, dims = [] : tensor<f32> -> tensor<77xf32>
    %6 = step.add %4, %5 : tensor<77xf32>
    %7 = step.rsqrt %6 : tensor<77xf32>
    %8 = step.broadcast_in_dim %7, dims = [0] : tensor<77xf32> -> tensor<77x96xf32>
    %9 = step.mul %2, %8 : tensor<77x96xf32>
    %10 = step.cast %g : tensor<77x96xbf16> -> tensor<77x96xf32>
    %11 = step.broadcast_in_dim %gamma, dims = [1] : tensor<96xf32> -> tensor<77x96xf32>
    %12 = step.mul %10, %11 : tensor<77x96xf32>
    %13 = step.reduce_mean %12 dims = [1] : tensor<77x96xf32> -> tensor<77xf32>
    %14 = step.mul %12, %9 : tensor<77x96xf32>
    %15 = step.reduce_mean %14 dims = [1] : tensor<77x96xf32> -> tensor<77xf32>
    %16 = step.broadcast_in_dim %13, dims = [0] : tensor<77xf32> -> tensor<77x96xf32>
    %17 = step.broadcast_in_dim %15, dims = [0] : tensor<77xf32> -> tensor<77x96xf32>
    %18 = step.mul %9, %17 : tensor<77x96xf32>
    %19 = step.sub %12, %16 : tensor<77x96xf32>
    %20 = step.sub %19, %18 : tensor<77x96xf32>
    %21 = step.mul %8, %20 : tensor<77x96xf32>
    %22 = step.cast %21 : tensor<77x96xf32> -> tensor<77x96xbf16>
    step.yield %7, %21, %22 : tensor<77xf32>, tensor<77x96xf32>, tensor<77x96xbf16>
  })";

TEST(FusionRowChain, LayerNormBackwardIsOneRowKernelInThreeStages) {
  KernelSource ks = firstKernel(
      fusionFnN("%x: tensor<77x96xf32>, %e: tensor<f32>, %dy: "
                "tensor<77x96xbf16>, %w: tensor<96xf32>",
                kLnGradChain,
                {"tensor<77xf32>", "tensor<77x96xf32>", "tensor<77x96xbf16>"}),
      "chain_ln");
  EXPECT_EQ(ks.params,
            (Params{"in0", "in1", "in2", "in3", "out0", "out1", "out2"}));
  // The reduce kernels' row mapping: a warp per row, 8 rows per block.
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(ks.gridX, 10);
  // Stage 0: the mean of x and the mean of dy * gamma (it needs no row
  // value); stage 1: the variance; stage 2: the mean of its product with
  // xhat. Then one pass of stores.
  EXPECT_TRUE(contains(ks.source, "// stage 0"));
  EXPECT_TRUE(contains(ks.source, "// stage 2"));
  EXPECT_FALSE(contains(ks.source, "// stage 3"));
  EXPECT_EQ(count(ks.source, "rowReduce<true>("), 4u);
  // Four passes over the row, each unrolled over a lane's 3 elements,
  // after one loop loading the lane's elements of x and dy (read by three
  // and four passes) into registers: every pass reads them there, and no
  // pass reads x or dy from memory.
  EXPECT_EQ(count(ks.source, "#pragma unroll\n    for (int j_ = 0; j_ < 3; "
                             "++j_) {\n      const int kk = (int)(threadIdx.x "
                             "& 31) + j_ * 32;"),
            5u);
  EXPECT_TRUE(contains(ks.source, "    float rc0_[3];\n    float rc2_[3];\n"));
  EXPECT_TRUE(contains(ks.source,
                       "rc0_[j_] = live_ && kk < 96 ? in0[base + kk] : "
                       "(float)0;\n      rc2_[j_] = live_ && kk < 96 ? "
                       "__bfloat162float(in2[base + kk]) : (float)0;\n"));
  EXPECT_EQ(count(ks.source, "in0[off]"), 0u);
  EXPECT_EQ(count(ks.source, "in2[off]"), 0u);
  EXPECT_EQ(count(ks.source, " = rc0_[j_];"), 3u); // stages 0, 1; the stores
  size_t preload = ks.source.find("float rc0_[3];");
  ASSERT_NE(preload, std::string::npos);
  EXPECT_LT(preload, ks.source.find("// stage 0"));
  // No column reduction: the launch bounds name no blocks an SM.
  EXPECT_TRUE(contains(ks.source, "__launch_bounds__(256) chain_ln("));
  // rsqrt(var + eps) once per row, between the variance and stage 2.
  size_t var = ks.source.find("const float res2 = acc2 / 96.0f;");
  size_t rsqrt = ks.source.find("1.0f / sqrtf(");
  size_t stage2 = ks.source.find("// stage 2");
  ASSERT_NE(var, std::string::npos);
  EXPECT_LT(var, rsqrt);
  EXPECT_LT(rsqrt, stage2);
  EXPECT_EQ(count(ks.source, "1.0f / sqrtf("), 1u);
  // Per-row values are read as locals, and gamma at the lane's column kk
  // itself (FusionExpr::splitIndex), in the three passes that read
  // dy * gamma: no division of the element's offset by the row length.
  EXPECT_EQ(count(ks.source, "/ 96;"), 0u);
  EXPECT_EQ(count(ks.source, " = kk;\n"), 3u);
  // The stores: dx (f32, bf16) per element, rstd by the row's lead lane;
  // a warp past the last row reads row 0 and stores nothing.
  EXPECT_TRUE(contains(ks.source, "out1[off] = "));
  EXPECT_TRUE(contains(ks.source, "out2[off] = fs")); // its rounded bf16
  EXPECT_TRUE(contains(ks.source, "if (live_ && (threadIdx.x & 31) == 0) {"));
  EXPECT_TRUE(contains(ks.source, "out0[o] = "));
  EXPECT_TRUE(contains(ks.source, "const int o = live_ ? row : (int)0;"));
  expectCompiles(ks);
}

TEST(FusionRowChain, LongRowsTakeABlockEach) {
  // Softmax written out over rows of 3000: a block per row, blockReduce.
  KernelSource ks = firstKernel(
      fusionFn(
          "%x: tensor<5x3000xf32>",
          R"(step.fusion "row_chain" (%x) : (tensor<5x3000xf32>) -> tensor<5x3000xf32> {
  ^bb0(%a: tensor<5x3000xf32>):
    %0 = step.reduce_max %a dims = [1] : tensor<5x3000xf32> -> tensor<5xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<5xf32> -> tensor<5x3000xf32>
    %2 = step.sub %a, %1 : tensor<5x3000xf32>
    %3 = step.exp %2 : tensor<5x3000xf32>
    %4 = step.reduce_sum %3 dims = [1] : tensor<5x3000xf32> -> tensor<5xf32>
    %5 = step.broadcast_in_dim %4, dims = [0] : tensor<5xf32> -> tensor<5x3000xf32>
    %6 = step.div %3, %5 : tensor<5x3000xf32>
    step.yield %6 : tensor<5x3000xf32>
  })",
          "tensor<5x3000xf32>"),
      "chain_softmax");
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(ks.gridX, 5);
  EXPECT_EQ(count(ks.source, "rowReduce<false>("), 2u);
  EXPECT_TRUE(contains(ks.source, "MaxNaNOp()(acc0, "));
  // 12 elements a thread: the passes unrolled, x read once into
  // registers (both stages and the stores read it).
  EXPECT_EQ(count(ks.source, "for (int j_ = 0; j_ < 12; ++j_) {\n"
                             "      const int kk = (int)threadIdx.x + j_ * "
                             "(int)blockDim.x;"),
            4u);
  EXPECT_EQ(count(ks.source, "in0[base + kk]"), 1u);
  EXPECT_EQ(count(ks.source, "in0[off]"), 0u);
  EXPECT_FALSE(contains(ks.source, "if (threadIdx.x == 0)")); // no row result
  expectCompiles(ks);
}

TEST(FusionRowChain, RowsOfMoreThan32ElementsALanePassInALoop) {
  // Rows of 9000 in blocks of 256: 36 elements a thread, a plain loop.
  KernelSource ks = firstKernel(
      fusionFn(
          "%x: tensor<3x9000xf32>",
          R"(step.fusion "row_chain" (%x) : (tensor<3x9000xf32>) -> tensor<3x9000xf32> {
  ^bb0(%a: tensor<3x9000xf32>):
    %0 = step.reduce_mean %a dims = [1] : tensor<3x9000xf32> -> tensor<3xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<3xf32> -> tensor<3x9000xf32>
    %2 = step.sub %a, %1 : tensor<3x9000xf32>
    step.yield %2 : tensor<3x9000xf32>
  })",
          "tensor<3x9000xf32>"),
      "chain_long");
  EXPECT_EQ(count(ks.source, "kk += (int)blockDim.x"), 2u);
  EXPECT_FALSE(contains(ks.source, "j_"));
  expectCompiles(ks);
}

TEST(FusionRowChain, ColumnSumsAddBlockPartialsInASecondPhase) {
  // Softmax over 2100 rows of 96 with two column reductions of values of
  // the chain (a sum of the result, a mean of x): the grid capped at 256
  // blocks (263 for a warp a row), each block's column partials a row of
  // a [256, 96] array, the `_cols` phase adding them per column.
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<2100x96xf32>",
          R"(step.fusion "row_chain" (%x) : (tensor<2100x96xf32>) -> (tensor<2100x96xf32>, tensor<96xf32>, tensor<96xbf16>) {
  ^bb0(%a: tensor<2100x96xf32>):
    %0 = step.reduce_max %a dims = [1] : tensor<2100x96xf32> -> tensor<2100xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<2100xf32> -> tensor<2100x96xf32>
    %2 = step.sub %a, %1 : tensor<2100x96xf32>
    %3 = step.exp %2 : tensor<2100x96xf32>
    %4 = step.reduce_sum %3 dims = [1] : tensor<2100x96xf32> -> tensor<2100xf32>
    %5 = step.broadcast_in_dim %4, dims = [0] : tensor<2100xf32> -> tensor<2100x96xf32>
    %6 = step.div %3, %5 : tensor<2100x96xf32>
    %7 = step.reduce_sum %6 dims = [0] : tensor<2100x96xf32> -> tensor<96xf32>
    %8 = step.cast %a : tensor<2100x96xf32> -> tensor<2100x96xbf16>
    %9 = step.reduce_mean %8 dims = [0] : tensor<2100x96xbf16> -> tensor<96xbf16>
    step.yield %6, %7, %9 : tensor<2100x96xf32>, tensor<96xf32>, tensor<96xbf16>
  })",
          {"tensor<2100x96xf32>", "tensor<96xf32>", "tensor<96xbf16>"}),
      "chain_cols");
  EXPECT_EQ(ks.params, (Params{"in0", "out0", "out1", "out2"}));
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(ks.gridX, 263); // a block a row of 8 rows (under 528)
  ASSERT_EQ(ks.then.size(), 1u);
  EXPECT_EQ(ks.then[0].suffix, "_cols");
  EXPECT_EQ(ks.then[0].gridX, 3); // 96 columns, 32 a block
  EXPECT_EQ(ks.then[0].blockX, 256);
  // Per warp, its rows' column sums in its row of a [8, 96] array in
  // dynamic shared memory (one per reduction), added in the store pass;
  // no registers held across the rows.
  EXPECT_EQ(ks.sharedBytes, 2 * 8 * 96 * 4);
  EXPECT_TRUE(contains(ks.source, "float *const cacc2_ = "
                                  "reinterpret_cast<float *>(cdyn_ + 0);"));
  EXPECT_TRUE(contains(ks.source, "float *const cacc3_ = "
                                  "reinterpret_cast<float *>(cdyn_ + 3072);"));
  EXPECT_TRUE(
      contains(ks.source, "cacc2_[cw_ + kk] = SumOp()(cacc2_[cw_ + kk], "));
  EXPECT_TRUE(
      contains(ks.source, "cacc3_[cw_ + kk] = SumOp()(cacc3_[cw_ + kk], "));
  EXPECT_FALSE(contains(ks.source, "float cacc2["));
  // The warps in order, then the block's row of partials.
  EXPECT_TRUE(
      contains(ks.source, "__device__ float chain_cols_cacc2[263 * 96];"));
  EXPECT_TRUE(contains(ks.source, "v_ = SumOp()(v_, cacc2_[w_ * 96 + c_]);"));
  EXPECT_TRUE(
      contains(ks.source, "chain_cols_cacc3[blockIdx.x * 96 + c_] = v_;"));
  // The second phase: lanes over the partials, the mean divided by the
  // rows, each result rounded once.
  size_t phase = ks.source.find("chain_cols_cols(");
  ASSERT_NE(phase, std::string::npos);
  EXPECT_LT(ks.source.find("for (int b_ = ty; b_ < 263; b_ += 8)\n", phase),
            std::string::npos);
  EXPECT_EQ(count(ks.source, "__shared__ float csh0_[8][33];"), 1u);
  EXPECT_TRUE(contains(ks.source, "acc3 / 2100.0f"));
  EXPECT_TRUE(contains(ks.source, "out1[c_] = "));
  EXPECT_TRUE(contains(ks.source, "out2[c_] = __float2bfloat16_rn("));
  // x, read by both stages and the stores, is loaded once into registers;
  // with that the kernel asks ptxas for registers enough for three blocks
  // an SM.
  EXPECT_EQ(count(ks.source, "in0[base + kk]"), 1u);
  EXPECT_TRUE(contains(ks.source, "__launch_bounds__(256, 3) chain_cols("));
  expectCompiles(ks);
}

TEST(FusionRowChain, CachedRowsWithColumnSumsRunOneWaveOfThreeBlocksAnSM) {
  // 8192 rows of 96 (1024 blocks of 8 warps): a column reduction caps the
  // grid, at 3 x 132 blocks when the row's inputs are kept in registers.
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<8192x96xf32>",
          R"(step.fusion "row_chain" (%x) : (tensor<8192x96xf32>) -> (tensor<8192x96xf32>, tensor<96xf32>) {
  ^bb0(%a: tensor<8192x96xf32>):
    %0 = step.reduce_mean %a dims = [1] : tensor<8192x96xf32> -> tensor<8192xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<8192xf32> -> tensor<8192x96xf32>
    %2 = step.sub %a, %1 : tensor<8192x96xf32>
    %3 = step.reduce_sum %2 dims = [0] : tensor<8192x96xf32> -> tensor<96xf32>
    step.yield %2, %3 : tensor<8192x96xf32>, tensor<96xf32>
  })",
          {"tensor<8192x96xf32>", "tensor<96xf32>"}),
      "chain_wave");
  EXPECT_EQ(ks.gridX, 396);
  EXPECT_TRUE(
      contains(ks.source, "__device__ float chain_wave_cacc1[396 * 96];"));
  EXPECT_TRUE(contains(ks.source, "__launch_bounds__(256, 3) chain_wave("));
  EXPECT_EQ(count(ks.source, "in0[base + kk]"), 1u);
  expectCompiles(ks);
}

TEST(FusionRowChain, ManyCachedRegistersKeepFourBlocksAnSM) {
  // Rows of 1024 (32 elements a lane), x and y each read by two passes:
  // 64 cached registers, more than three blocks an SM leave a thread with
  // them (ptxas would spill), so the grid stays at 528 and the launch
  // bounds name no blocks an SM.
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<8192x1024xf32>, %y: tensor<8192x1024xf32>",
          R"(step.fusion "row_chain" (%x, %y) : (tensor<8192x1024xf32>, tensor<8192x1024xf32>) -> (tensor<8192x1024xf32>, tensor<1024xf32>) {
  ^bb0(%a: tensor<8192x1024xf32>, %b: tensor<8192x1024xf32>):
    %0 = step.mul %a, %b : tensor<8192x1024xf32>
    %1 = step.reduce_sum %0 dims = [1] : tensor<8192x1024xf32> -> tensor<8192xf32>
    %2 = step.broadcast_in_dim %1, dims = [0] : tensor<8192xf32> -> tensor<8192x1024xf32>
    %3 = step.sub %0, %2 : tensor<8192x1024xf32>
    %4 = step.reduce_sum %3 dims = [0] : tensor<8192x1024xf32> -> tensor<1024xf32>
    step.yield %3, %4 : tensor<8192x1024xf32>, tensor<1024xf32>
  })",
          {"tensor<8192x1024xf32>", "tensor<1024xf32>"}),
      "chain_many");
  EXPECT_TRUE(
      contains(ks.source, "    float rc0_[32];\n    float rc1_[32];\n"));
  EXPECT_EQ(ks.gridX, 528);
  EXPECT_TRUE(contains(ks.source, "__launch_bounds__(256) chain_many("));
  expectCompiles(ks);
}

TEST(FusionRowChain, RegistersForCachedRowsAreCapped) {
  // Rows of 1024 (32 elements a lane): three inputs each read by the mean
  // pass and the stores, but 64 registers hold two of them; the third
  // (in2) is read from memory by both passes.
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<16x1024xf32>, %y: tensor<16x1024xf32>, %z: "
          "tensor<16x1024xf32>",
          R"(step.fusion "row_chain" (%x, %y, %z) : (tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>) -> tensor<16x1024xf32> {
  ^bb0(%a: tensor<16x1024xf32>, %b: tensor<16x1024xf32>, %c: tensor<16x1024xf32>):
    %0 = step.mul %a, %b : tensor<16x1024xf32>
    %1 = step.mul %0, %c : tensor<16x1024xf32>
    %2 = step.reduce_sum %1 dims = [1] : tensor<16x1024xf32> -> tensor<16xf32>
    %3 = step.broadcast_in_dim %2, dims = [0] : tensor<16xf32> -> tensor<16x1024xf32>
    %4 = step.sub %1, %3 : tensor<16x1024xf32>
    step.yield %4 : tensor<16x1024xf32>
  })",
          {"tensor<16x1024xf32>"}),
      "chain_cap");
  EXPECT_TRUE(
      contains(ks.source, "    float rc0_[32];\n    float rc1_[32];\n"));
  EXPECT_FALSE(contains(ks.source, "rc2_"));
  EXPECT_EQ(count(ks.source, "in2[off]"), 2u);
  EXPECT_TRUE(contains(ks.source, "__launch_bounds__(256) chain_cap("));
  expectCompiles(ks);
}

/// x minus its row mean, plus g (read only by the stores), over rows of
/// `cols`: the shape of the layer-norm gradient's incoming residual
/// gradient.
std::string lateInputChain(int cols) {
  std::string t = "tensor<64x" + std::to_string(cols) + "xf32>";
  return R"(step.fusion "row_chain" (%x, %g) : ()" + t + ", " + t + ") -> " +
         t + R"( {
  ^bb0(%a: )" + t + ", %b: " + t + R"():
    %0 = step.reduce_mean %a dims = [1] : )" + t + R"( -> tensor<64xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<64xf32> -> )" + t + R"(
    %2 = step.sub %a, %1 : )" + t + R"(
    %3 = step.add %2, %b : )" + t + R"(
    step.yield %3 : )" + t + R"(
  })";
}

TEST(FusionRowChain, AnInputOnlyALaterPassReadsIsPrefetchedIntoL2) {
  // Rows of 96 (3 elements a lane): x is read by the mean and the stores
  // (cached in registers); g only by the stores, so its rows' 128-byte
  // lines (384 bytes: lines 0..3, the last clamped to byte 383) are asked
  // into L2 a row ahead: a warp's first row before the row loop, each next
  // one (the row plus the grid's rows) at the end of the row before.
  std::string t = "tensor<64x96xf32>";
  KernelSource ks = firstKernel(
      fusionFn("%x: " + t + ", %g: " + t, lateInputChain(96), t),
      "chain_late");
  EXPECT_TRUE(contains(ks.source, "    float rc0_[3];\n"));
  EXPECT_FALSE(contains(ks.source, "rc1_"));
  const std::string ask =
      "if (pr_ < 64) { // in1's row pr_ into L2\n"
      "      const char *p_ = reinterpret_cast<const char *>(in1 + pr_ * "
      "96);\n"
      "      for (int l_ = (int)(threadIdx.x & 31); l_ <= 3; l_ += 32)\n"
      "        stepPrefetchL2(p_ + min(l_ * 128, 383));\n";
  EXPECT_EQ(count(ks.source, "stepPrefetchL2(p_"), 2u); // not x's rows
  size_t first = ks.source.find(
      "const long long pr_ = (long long)blockIdx.x * 8 + (threadIdx.x >> "
      "5);\n    " + ask);
  size_t loop = ks.source.find("for (int row0_ = ");
  size_t stores = ks.source.find("in1[off]");
  size_t next = ks.source.find(
      "const long long pr_ = (long long)row + (long long)gridDim.x * 8;\n"
      "      " + ask.substr(0, ask.find('\n')));
  ASSERT_NE(first, std::string::npos) << ks.source;
  ASSERT_NE(next, std::string::npos) << ks.source;
  EXPECT_LT(first, loop);
  EXPECT_LT(stores, next); // after the pass that reads g, in the loop
  EXPECT_EQ(count(ks.source, "in1[off]"), 1u); // the stores still load g
  expectCompiles(ks);

  // Rows of 9000 (a block a row, a plain loop over a thread's 36
  // elements): no prefetch, the rows in flight would be a large part of
  // L2.
  std::string u = "tensor<64x9000xf32>";
  KernelSource big = firstKernel(
      fusionFn("%x: " + u + ", %g: " + u, lateInputChain(9000), u),
      "chain_late_long");
  EXPECT_FALSE(contains(big.source, "stepPrefetchL2(p_"));
  EXPECT_EQ(count(big.source, "in1[off]"), 1u);
}

//===----------------------------------------------------------------------===//
// reduction fusions with per-element results (step-fuse-loop-reductions)
//===----------------------------------------------------------------------===//

TEST(FusionReduce, PrologueResultIsStoredWhereEachElementIsRead) {
  // step-fuse-loop-reductions: a bias gradient's column sum over a loop's
  // value that the fusion also yields ([2500, 64]: the split column
  // kernel, 35 chunks, 4 outputs a lane), stored in the accumulation loop
  // once per element: 4 lanes of a vector, stored once per row.
  KernelSource ks = firstKernel(
      fusionFnN(
          "%a: tensor<2500x64xf32>, %b: tensor<2500x64xf32>",
          R"(step.fusion "reduction" (%a, %b) : (tensor<2500x64xf32>, tensor<2500x64xf32>) -> (tensor<2500x64xbf16>, tensor<64xbf16>) {
  ^bb0(%x: tensor<2500x64xf32>, %y: tensor<2500x64xf32>):
    %0 = step.tanh %x : tensor<2500x64xf32>
    %1 = step.mul %0, %y : tensor<2500x64xf32>
    %2 = step.cast %1 : tensor<2500x64xf32> -> tensor<2500x64xbf16>
    %3 = step.reduce_sum %2 dims = [0] : tensor<2500x64xbf16> -> tensor<64xbf16>
    step.yield %2, %3 : tensor<2500x64xbf16>, tensor<64xbf16>
  })",
          {"tensor<2500x64xbf16>", "tensor<64xbf16>"}),
      "red_store");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0", "out1"}));
  EXPECT_TRUE(contains(ks.source, "red_store_ticket")); // split column
  // A row's stores would hold back the next rows' loads: the loads of 4
  // rows go first (kColumnBatch), then each row is computed and stored.
  size_t batch = ks.source.find("for (int k0 = s * 72 + ty; k0 < end; "
                                "k0 += 8 * 4) {");
  size_t loads = ks.source.find(
      "x0_[u_] = reinterpret_cast<const Vec<float, 4> *>(in0)[off4 / 4];");
  size_t loop = ks.source.find("const Vec<float, 4> x0 = x0_[u_];");
  ASSERT_NE(batch, std::string::npos);
  EXPECT_LT(batch, loads);
  EXPECT_LT(loads, loop);
  size_t lane = ks.source.find("y0.v[e] = fs"); // the cast's bf16
  size_t store = ks.source.find(
      "reinterpret_cast<Vec<__nv_bfloat16, 4> *>(out0)[off4 / 4] = y0;");
  size_t combine = ks.source.find("sh0[ty][e][tx] = acc0_[e];"); // lanes
  ASSERT_NE(loop, std::string::npos);
  ASSERT_NE(lane, std::string::npos);
  ASSERT_NE(store, std::string::npos);
  EXPECT_LT(loop, lane);
  EXPECT_LT(lane, store);
  EXPECT_LT(store, combine);
  EXPECT_EQ(count(ks.source, "out0"), 2u); // the parameter, the row store
  EXPECT_TRUE(contains(ks.source, "out1[o] = "));
  expectCompiles(ks);
}

TEST(FusionReduce, PerElementResultOfAReductionThrows) {
  // x - sum(x) broadcast back: a per-element value computed from a root
  // is no prologue; this kernel cannot store it (a row_chain can).
  Parsed p = parse(fusionFnN(
      "%x: tensor<8x16xf32>",
      R"(step.fusion "reduction" (%x) : (tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<8x16xf32>):
    %0 = step.reduce_sum %a dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
    %1 = step.broadcast_in_dim %0, dims = [0] : tensor<8xf32> -> tensor<8x16xf32>
    %2 = step.sub %a, %1 : tensor<8x16xf32>
    step.yield %2, %0 : tensor<8x16xf32>, tensor<8xf32>
  })",
      {"tensor<8x16xf32>", "tensor<8xf32>"}));
  ASSERT_TRUE(p.module);
  auto f = mlir::cast<mlir::step::FusionOp>(p.func().getBody().front().front());
  try {
    detail::emitFusionKernel(f, "k");
    ADD_FAILURE() << "no error";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "computed from a reduction")) << e.what();
  }
}

} // namespace
