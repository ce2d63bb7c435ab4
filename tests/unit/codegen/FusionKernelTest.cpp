//===- FusionKernelTest.cpp - Kernels of loop and reduction fusions -------===//
//
// Hand-written step.fusion ops in the shapes step-fuse produces (the
// contract in docs/codegen.md, "Fused kernels"): what each kernel must hold
// (one loop, vector loads, block reductions, the ops' own per-element code,
// the epilogue on store) and that NVRTC compiles it for sm_80 and sm_90.
// No GPU: the numerics are those of the unfused kernels by construction
// (the same ElementwiseSpec text, the same accumulation order).
//
//===----------------------------------------------------------------------===//
#include "FusionTestUtil.h"

#include "compiler/codegen/Emitters.h"
#include "compiler/codegen/Nvrtc.h"
#include "runtime/Tensor.h"

namespace {
using namespace step::codegen;
using namespace step::codegen::test;

//===----------------------------------------------------------------------===//
// loop
//===----------------------------------------------------------------------===//

TEST(FusionLoop, BiasReluCastToBf16IsOneVectorizedLoop) {
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<8x64xf32>, %b: tensor<64xf32>", R"(step.fusion "loop" (%x, %b) : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xbf16> {
  ^bb0(%a: tensor<8x64xf32>, %c: tensor<64xf32>):
    %0 = step.broadcast_in_dim %c, dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
    %1 = step.add %a, %0 : tensor<8x64xf32>
    %2 = step.relu %1 : tensor<8x64xf32>
    %3 = step.cast %2 : tensor<8x64xf32> -> tensor<8x64xbf16>
    step.yield %3 : tensor<8x64xbf16>
  })", "tensor<8x64xbf16>"), "loop_bias");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0"}));
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(count(ks.source, "for ("), 2u); // the loop and its 4 lanes
  EXPECT_TRUE(contains(ks.source, "v < 128;")); // 512 elements, by 4
  // x at the loop index, the bias as 4 consecutive elements of its row.
  EXPECT_TRUE(contains(ks.source, "reinterpret_cast<const Vec<float, 4> "
                                  "*>(in0)[v]"));
  EXPECT_TRUE(contains(ks.source, "reinterpret_cast<const Vec<float, 4> "
                                  "*>(in1)[b0 / 4]"));
  EXPECT_TRUE(contains(ks.source, "reinterpret_cast<Vec<__nv_bfloat16, 4> "
                                  "*>(out0)[v] = y0;"));
  // Each op's own per-element code, in order.
  size_t add = ks.source.find("r0 = a0 + a1;");
  size_t relu = ks.source.find("r0 = a0 < 0.0f ? 0.0f : a0;");
  size_t cast = ks.source.find("rounded to nearest even on store");
  ASSERT_NE(add, std::string::npos);
  ASSERT_NE(relu, std::string::npos);
  ASSERT_NE(cast, std::string::npos);
  EXPECT_LT(add, relu);
  EXPECT_LT(relu, cast);
  EXPECT_TRUE(contains(ks.source, "__float2bfloat16_rn(")); // one rounding
  EXPECT_TRUE(contains(ks.source, "#include <cuda_bf16.h>"));
  expectCompiles(ks);
}

TEST(FusionLoop, ColumnBroadcastIsReadPerLane) {
  // A [8] vector broadcast along the rows and a rank-0 scale: neither is a
  // vector load; the scale is loaded once, before the loop.
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<8x6xf16>, %m: tensor<8xf16>, %s: tensor<f16>",
      R"(step.fusion "loop" (%x, %m, %s) : (tensor<8x6xf16>, tensor<8xf16>, tensor<f16>) -> tensor<8x6xf16> {
  ^bb0(%a: tensor<8x6xf16>, %c: tensor<8xf16>, %d: tensor<f16>):
    %0 = step.broadcast_in_dim %c, dims = [0] : tensor<8xf16> -> tensor<8x6xf16>
    %1 = step.sub %a, %0 : tensor<8x6xf16>
    %2 = step.broadcast_in_dim %d, dims = [] : tensor<f16> -> tensor<8x6xf16>
    %3 = step.mul %1, %2 : tensor<8x6xf16>
    %4 = step.exp %3 : tensor<8x6xf16>
    step.yield %4 : tensor<8x6xf16>
  })", "tensor<8x6xf16>"), "loop_col");
  EXPECT_TRUE(contains(ks.source, "*>(in0)[v]"));
  EXPECT_FALSE(contains(ks.source, "*>(in1)"));
  EXPECT_TRUE(contains(ks.source, "__half2float(in1[fi")); // per lane
  size_t hoisted = ks.source.find("__half2float(in2[0])");
  ASSERT_NE(hoisted, std::string::npos);
  EXPECT_LT(hoisted, ks.source.find("for ("));
  // f16 intermediates are rounded as the unfused kernels' stores round
  // (the storage value kept, the local widened from it).
  EXPECT_TRUE(contains(ks.source, " = __float2half_rn(r0);\n"));
  EXPECT_TRUE(contains(ks.source, " = __half2float(fs"));
  EXPECT_TRUE(contains(ks.source, "r0 = expf(a0);"));
  expectCompiles(ks);
}

TEST(FusionLoop, OddSizeIsScalarAndDropoutUsesItsOwnIndex) {
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<5x3xf32>, %b: tensor<3xf32>",
      R"(step.fusion "loop" (%x, %b) : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<15xf32> {
  ^bb0(%a: tensor<5x3xf32>, %c: tensor<3xf32>):
    %0 = step.broadcast_in_dim %c, dims = [1] : tensor<3xf32> -> tensor<5x3xf32>
    %1 = step.add %a, %0 : tensor<5x3xf32>
    %2 = step.reshape %1 : tensor<5x3xf32> -> tensor<15xf32>
    %3 = step.dropout %2 p = 2.500000e-01 seed = 42 : tensor<15xf32>
    step.yield %3 : tensor<15xf32>
  })", "tensor<15xf32>"), "loop_odd");
  EXPECT_FALSE(contains(ks.source, "Vec<"));
  EXPECT_TRUE(contains(ks.source, "v < 15;"));
  EXPECT_TRUE(contains(ks.source, "in0[i]"));
  EXPECT_TRUE(contains(ks.source, "splitmix64(42ull ^ splitmix64("));
  EXPECT_TRUE(contains(ks.source, "const long long i = fn")); // not i = i
  expectCompiles(ks);
}

// Dropout's offset is a rank-0 fusion input, read at index 0.
TEST(FusionLoop, DropoutOffsetIsReadAtZero) {
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<16xf32>, %t: tensor<i64>",
      R"(step.fusion "loop" (%x, %t) : (tensor<16xf32>, tensor<i64>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>, %s: tensor<i64>):
    %0 = step.exp %a : tensor<16xf32>
    %1 = step.dropout %0 offset %s p = 2.500000e-01 seed = 42 : tensor<16xf32>, tensor<i64>
    step.yield %1 : tensor<16xf32>
  })", "tensor<16xf32>"), "loop_offset");
  EXPECT_TRUE(contains(ks.source, "in1[0]"));
  EXPECT_FALSE(contains(ks.source, "in1[i]"));
  EXPECT_TRUE(contains(ks.source, "(unsigned long long)a1 * "
                                  "0x9e3779b97f4a7c15ull"));
  expectCompiles(ks);
}

TEST(FusionLoop, TwoOutputsOfDifferentShapesAndTypes) {
  // The pre-activation kept for the backward pass, and relu's mask as i1.
  KernelSource ks = firstKernel(fusionFnN(
      "%x: tensor<4x16xf32>, %y: tensor<4x16xf32>",
      R"(step.fusion "loop" (%x, %y) : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<64xf32>, tensor<4x16xi1>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>):
    %0 = step.mul %a, %b : tensor<4x16xf32>
    %1 = step.reshape %0 : tensor<4x16xf32> -> tensor<64xf32>
    %2 = step.compare gt, %0, %a : tensor<4x16xf32>
    step.yield %1, %2 : tensor<64xf32>, tensor<4x16xi1>
  })", {"tensor<64xf32>", "tensor<4x16xi1>"}), "loop_two");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0", "out1"}));
  EXPECT_EQ(count(ks.source, "r0 = a0 * a1;"), 1u); // computed once
  EXPECT_TRUE(contains(ks.source, "Vec<unsigned char, 4> y1;"));
  EXPECT_TRUE(contains(ks.source, "(a0 > a1) ? 1 : 0"));
  expectCompiles(ks);
}

TEST(FusionLoop, IntegerAndSelectKeepRawTypes) {
  KernelSource ks = firstKernel(fusionFn(
      "%p: tensor<8xi1>, %a: tensor<8xbf16>, %i: tensor<8xi64>",
      R"(step.fusion "loop" (%p, %a, %i) : (tensor<8xi1>, tensor<8xbf16>, tensor<8xi64>) -> tensor<8xbf16> {
  ^bb0(%q: tensor<8xi1>, %b: tensor<8xbf16>, %j: tensor<8xi64>):
    %0 = step.neg %j : tensor<8xi64>
    %1 = step.cast %0 : tensor<8xi64> -> tensor<8xbf16>
    %2 = step.select %q, %b, %1 : tensor<8xi1>, tensor<8xbf16>
    step.yield %2 : tensor<8xbf16>
  })", "tensor<8xbf16>"), "loop_raw");
  EXPECT_FALSE(contains(ks.source, "Vec<")); // an i64 input: scalar
  EXPECT_TRUE(contains(ks.source, "(unsigned long long)0 - (unsigned long "
                                  "long)a0"));
  // select moves values in their storage type, as its own kernel.
  EXPECT_TRUE(contains(ks.source, "const __nv_bfloat16 a1 = "
                                  "__float2bfloat16_rn("));
  EXPECT_TRUE(contains(ks.source, "r0 = a0 ? a1 : a2;"));
  expectCompiles(ks);
}

TEST(FusionLoop, CausalMaskFromIotas) {
  // iota is the coordinate along its dim: row index 0..7 and column 0..15.
  KernelSource ks = firstKernel(fusionFn(
      "%a: tensor<8x16xf32>, %b: tensor<8x16xf32>",
      R"(step.fusion "loop" (%a, %b) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>):
    %r = step.iota dim = 0 : tensor<8x16xi64>
    %c = step.iota dim = 1 : tensor<8x16xi64>
    %m = step.compare gt, %c, %r : tensor<8x16xi64>
    %s = step.select %m, %x, %y : tensor<8x16xi1>, tensor<8x16xf32>
    step.yield %s : tensor<8x16xf32>
  })", "tensor<8x16xf32>"), "loop_iota");
  EXPECT_TRUE(contains(ks.source, " / 16 % 8);")) << ks.source;
  EXPECT_TRUE(contains(ks.source, " / 1 % 16);")) << ks.source;
  EXPECT_TRUE(contains(ks.source, "r0 = (a0 > a1) ? 1 : 0;")) << ks.source;
  expectCompiles(ks);
}

TEST(FusionLoop, PadsAreIndexTestsAndASelect) {
  // Two slices' gradients padded to [4, 24] (overlapping windows, so no
  // concatenation) and summed; a third operand of no elements pads to all
  // fill (never read).
  KernelSource ks = firstKernel(
      fusionFn(
          "%a: tensor<4x8xbf16>, %b: tensor<4x16xbf16>, %e: tensor<4x0xbf16>",
          R"(step.fusion "loop" (%a, %b, %e) : (tensor<4x8xbf16>, tensor<4x16xbf16>, tensor<4x0xbf16>) -> tensor<4x24xbf16> {
  ^bb0(%x: tensor<4x8xbf16>, %y: tensor<4x16xbf16>, %z: tensor<4x0xbf16>):
    %p = step.pad %x low = [0, 0] high = [0, 16] value = 0.0 : tensor<4x8xbf16> -> tensor<4x24xbf16>
    %q = step.pad %y low = [0, 4] high = [0, 4] value = 0.0 : tensor<4x16xbf16> -> tensor<4x24xbf16>
    %s = step.add %p, %q : tensor<4x24xbf16>
    %w = step.pad %z low = [0, 0] high = [0, 24] value = 1.5 : tensor<4x0xbf16> -> tensor<4x24xbf16>
    %t = step.add %s, %w : tensor<4x24xbf16>
    step.yield %t : tensor<4x24xbf16>
  })",
          "tensor<4x24xbf16>"),
      "loop_pad");
  // Column c of the result is column c - 4 of %y where 0 <= c - 4 < 16.
  EXPECT_TRUE(contains(ks.source, " % 24 - 4;")) << ks.source;
  EXPECT_TRUE(contains(ks.source, " >= 16)")) << ks.source;
  EXPECT_TRUE(contains(ks.source, "in0[")) << ks.source;
  EXPECT_TRUE(contains(ks.source, "in1[")) << ks.source;
  EXPECT_FALSE(contains(ks.source, "in2[")) << ks.source; // no elements
  EXPECT_TRUE(contains(ks.source, "__double2bfloat16(1.5)")) << ks.source;
  EXPECT_TRUE(contains(ks.source, "Vec<")) << ks.source; // 96 elements
  expectCompiles(ks);
}

TEST(FusionLoop, PadsTilingADimAreOneConcatenation) {
  // Three +0.0 pads whose windows tile dim 1 ([0, 8), [8, 24), [24, 28)),
  // summed in any order: one decomposition, the piece whose window holds
  // the column read at its own index, plus +0.0f (as the adds: -0 -> +0).
  KernelSource ks = firstKernel(
      fusionFn(
          "%a: tensor<2x4x8xbf16>, %b: tensor<2x4x16xbf16>, %c: "
          "tensor<2x4x4xbf16>",
          R"(step.fusion "loop" (%a, %b, %c) : (tensor<2x4x8xbf16>, tensor<2x4x16xbf16>, tensor<2x4x4xbf16>) -> tensor<2x4x28xbf16> {
  ^bb0(%x: tensor<2x4x8xbf16>, %y: tensor<2x4x16xbf16>, %z: tensor<2x4x4xbf16>):
    %p = step.pad %x low = [0, 0, 0] high = [0, 0, 20] value = 0.0 : tensor<2x4x8xbf16> -> tensor<2x4x28xbf16>
    %q = step.pad %y low = [0, 0, 8] high = [0, 0, 4] value = 0.0 : tensor<2x4x16xbf16> -> tensor<2x4x28xbf16>
    %r = step.pad %z low = [0, 0, 24] high = [0, 0, 0] value = 0.0 : tensor<2x4x4xbf16> -> tensor<2x4x28xbf16>
    %s = step.add %r, %p : tensor<2x4x28xbf16>
    %t = step.add %q, %s : tensor<2x4x28xbf16>
    step.yield %t : tensor<2x4x28xbf16>
  })",
          "tensor<2x4x28xbf16>"),
      "cat");
  EXPECT_EQ(count(ks.source, " % 28;"), 1u) << ks.source;
  EXPECT_TRUE(contains(ks.source, " < 8) {")) << ks.source;
  EXPECT_TRUE(contains(ks.source, " < 24) {")) << ks.source;
  EXPECT_TRUE(contains(ks.source, "} else {")) << ks.source;
  EXPECT_TRUE(contains(ks.source, " * 16 + ")) << ks.source; // %y's rows
  EXPECT_EQ(count(ks.source, " + 0.0f;"), 3u) << ks.source;
  EXPECT_FALSE(contains(ks.source, "__float2bfloat16_rn(r0)")) << ks.source;
  expectCompiles(ks);
  // A -0.0 fill (x + -0 keeps -0), another fill, a gap, a second padded
  // dim: the pads and adds as such.
  for (auto [yw, q] :
       {std::pair<const char *, const char *>{
            "2x4x16", "low = [0, 0, 8] high = [0, 0, 0] value = -0.0"},
        {"2x4x16", "low = [0, 0, 8] high = [0, 0, 0] value = 1.0"},
        {"2x4x15", "low = [0, 0, 9] high = [0, 0, 0] value = 0.0"},
        {"1x4x16", "low = [1, 0, 8] high = [0, 0, 0] value = 0.0"}}) {
    std::string y = std::string("tensor<") + yw + "xbf16>";
    std::string body =
        R"(step.fusion "loop" (%a, %b) : (tensor<2x4x8xbf16>, )" + y +
        R"() -> tensor<2x4x24xbf16> {
  ^bb0(%x: tensor<2x4x8xbf16>, %y: )" +
        y + R"():
    %p = step.pad %x low = [0, 0, 0] high = [0, 0, 16] value = 0.0 : tensor<2x4x8xbf16> -> tensor<2x4x24xbf16>
    %q = step.pad %y )" +
        q + " : " + y + R"( -> tensor<2x4x24xbf16>
    %t = step.add %p, %q : tensor<2x4x24xbf16>
    step.yield %t : tensor<2x4x24xbf16>
  })";
    ks = firstKernel(fusionFn("%a: tensor<2x4x8xbf16>, %b: " + y, body,
                              "tensor<2x4x24xbf16>"),
                     "nocat");
    EXPECT_FALSE(contains(ks.source, " + 0.0f;")) << q;
    EXPECT_TRUE(contains(ks.source, "__float2bfloat16_rn(r0)")) << q;
  }
}

TEST(FusionLoop, UnsupportedKindsThrow) {
  Parsed p = parse(fusionFn("%x: tensor<4xf32>", R"(step.fusion "multi_tensor" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = step.neg %a : tensor<4xf32>
    step.yield %0 : tensor<4xf32>
  })", "tensor<4xf32>"));
  ASSERT_TRUE(p.module);
  auto f = mlir::cast<mlir::step::FusionOp>(p.func().getBody().front().front());
  // multi_tensor fusions are MultiTensorKernels.cpp's, not this emitter's.
  EXPECT_THROW(detail::emitFusionKernel(f, "k"), step::rt::Error);
}

//===----------------------------------------------------------------------===//
// reduction: reduce_* roots
//===----------------------------------------------------------------------===//

TEST(FusionReduce, RowMeanOfSquaresWithRsqrtEpilogue) {
  // RMSNorm's statistics: rsqrt(mean(x * x) + eps) per row.
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<16x256xf32>, %eps: tensor<f32>",
      R"(step.fusion "reduction" (%x, %eps) : (tensor<16x256xf32>, tensor<f32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16x256xf32>, %e: tensor<f32>):
    %0 = step.mul %a, %a : tensor<16x256xf32>
    %1 = step.reduce_mean %0 dims = [1] : tensor<16x256xf32> -> tensor<16xf32>
    %2 = step.broadcast_in_dim %e, dims = [] : tensor<f32> -> tensor<16xf32>
    %3 = step.add %1, %2 : tensor<16xf32>
    %4 = step.rsqrt %3 : tensor<16xf32>
    step.yield %4 : tensor<16xf32>
  })", "tensor<16xf32>"), "red_rms");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0"}));
  EXPECT_EQ(ks.gridX, 2); // rows of 256: a warp each, 8 per block
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_EQ(count(ks.source, "r0 = a0 * a1;"), 1u); // a and a: one load
  EXPECT_EQ(count(ks.source, "in0[off]"), 1u);
  EXPECT_TRUE(contains(ks.source, "acc0 = SumOp()(acc0, fv"));
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(acc0, SumOp(), (float)(0.0f)"));
  EXPECT_TRUE(contains(ks.source, "const float res0 = acc0 / 256.0f;"));
  // The epilogue after the reduction, by the storing thread.
  size_t reduce = ks.source.find("rowReduce<true>(acc0");
  ASSERT_NE(reduce, std::string::npos);
  size_t rsqrt = ks.source.find("r0 = 1.0f / sqrtf(a0);");
  ASSERT_NE(rsqrt, std::string::npos);
  EXPECT_LT(reduce, rsqrt);
  EXPECT_TRUE(contains(ks.source, "out0[o] = "));
  expectCompiles(ks);
}

TEST(FusionReduce, SiblingReductionsShareOneRead) {
  // sum, max and sum of squares of one bf16 row (keepdim and not), and an
  // epilogue of two roots: four results of two shapes.
  KernelSource ks = firstKernel(fusionFnN(
      "%x: tensor<32x100xbf16>",
      R"(step.fusion "reduction" (%x) : (tensor<32x100xbf16>) -> (tensor<32xf32>, tensor<32x1xf32>, tensor<32xf32>, tensor<32xf32>) {
  ^bb0(%a: tensor<32x100xbf16>):
    %0 = step.cast %a : tensor<32x100xbf16> -> tensor<32x100xf32>
    %1 = step.reduce_sum %0 dims = [1] : tensor<32x100xf32> -> tensor<32xf32>
    %2 = step.reduce_max %0 dims = [1] keepdim : tensor<32x100xf32> -> tensor<32x1xf32>
    %3 = step.mul %0, %0 : tensor<32x100xf32>
    %4 = step.reduce_sum %3 dims = [1] : tensor<32x100xf32> -> tensor<32xf32>
    %5 = step.reshape %2 : tensor<32x1xf32> -> tensor<32xf32>
    %6 = step.sub %4, %5 : tensor<32xf32>
    step.yield %1, %2, %4, %6 : tensor<32xf32>, tensor<32x1xf32>, tensor<32xf32>, tensor<32xf32>
  })", {"tensor<32xf32>", "tensor<32x1xf32>", "tensor<32xf32>",
        "tensor<32xf32>"}), "red_sib");
  EXPECT_EQ(ks.params, (Params{"in0", "out0", "out1", "out2", "out3"}));
  EXPECT_EQ(ks.blockX, 256); // rows of 100: a warp each, 8 per block
  EXPECT_EQ(count(ks.source, "__bfloat162float(in0[off])"), 1u);
  EXPECT_EQ(count(ks.source, "for (int kk"), 1u); // one pass for all three
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(acc0, SumOp()"));
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(acc1, MaxNaNOp()"));
  EXPECT_TRUE(contains(ks.source, "rowReduce<true>(acc2, SumOp()"));
  EXPECT_TRUE(contains(ks.source, "out3[o] = "));
  expectCompiles(ks);
}

TEST(FusionReduce, ColumnSumIsABiasGradient) {
  KernelSource ks = firstKernel(fusionFn(
      "%g: tensor<64x48xbf16>",
      R"(step.fusion "reduction" (%g) : (tensor<64x48xbf16>) -> tensor<48xbf16> {
  ^bb0(%a: tensor<64x48xbf16>):
    %0 = step.cast %a : tensor<64x48xbf16> -> tensor<64x48xf32>
    %1 = step.reduce_sum %0 dims = [0] : tensor<64x48xf32> -> tensor<48xf32>
    %2 = step.cast %1 : tensor<48xf32> -> tensor<48xbf16>
    step.yield %2 : tensor<48xbf16>
  })", "tensor<48xbf16>"), "red_col");
  EXPECT_EQ(ks.gridX, 2); // 48 outputs, 32 per block
  EXPECT_TRUE(contains(ks.source, "__shared__ float sh0[8][33];"));
  EXPECT_TRUE(contains(ks.source, "kk += 8"));
  EXPECT_FALSE(contains(ks.source, "blockReduce(acc"));
  // The epilogue's cast is stored as the bf16 it was rounded to.
  EXPECT_TRUE(contains(ks.source, "out0[o] = fs"));
  EXPECT_EQ(count(ks.source, "__float2bfloat16_rn("), 1u);
  expectCompiles(ks);
}

TEST(FusionReduce, LayerNormWeightGradientSplitsRows) {
  // sum(dy) and sum(dy * xhat) over 8192 rows of 768: 4 adjacent outputs
  // a lane (768 % 4 == 0), so 6 tiles of 128 outputs; min(ceil(1024 / 6),
  // 8192 / 64) = 128 chunks of 64 rows; one partial array per root, one
  // ticket per tile; each row's 4 elements of an input one vector load.
  KernelSource ks = firstKernel(fusionFnN(
      "%dy: tensor<8192x768xbf16>, %xh: tensor<8192x768xf32>",
      R"(step.fusion "reduction" (%dy, %xh) : (tensor<8192x768xbf16>, tensor<8192x768xf32>) -> (tensor<768xf32>, tensor<768xf32>) {
  ^bb0(%a: tensor<8192x768xbf16>, %b: tensor<8192x768xf32>):
    %0 = step.cast %a : tensor<8192x768xbf16> -> tensor<8192x768xf32>
    %1 = step.reduce_sum %0 dims = [0] : tensor<8192x768xf32> -> tensor<768xf32>
    %2 = step.mul %0, %b : tensor<8192x768xf32>
    %3 = step.reduce_sum %2 dims = [0] : tensor<8192x768xf32> -> tensor<768xf32>
    step.yield %1, %3 : tensor<768xf32>, tensor<768xf32>
  })", {"tensor<768xf32>", "tensor<768xf32>"}), "ln_col");
  EXPECT_EQ(ks.gridX, 6 * 128);
  EXPECT_TRUE(
      contains(ks.source, "__device__ float ln_col_partial0[128 * 768];"));
  EXPECT_TRUE(
      contains(ks.source, "__device__ float ln_col_partial1[128 * 768];"));
  EXPECT_TRUE(contains(ks.source, "__device__ unsigned int ln_col_ticket[6];"));
  EXPECT_TRUE(
      contains(ks.source, "for (int kk = s * 64 + ty; kk < end; kk += 8)"));
  EXPECT_TRUE(contains(ks.source, "const Vec<__nv_bfloat16, 4> x0 = "
                                  "reinterpret_cast<const Vec<__nv_bfloat16, "
                                  "4> *>(in0)[off4 / 4];"));
  EXPECT_TRUE(contains(ks.source, "const Vec<float, 4> x1 = "));
  EXPECT_EQ(count(ks.source, "in0["), 0u); // every read a vector lane
  // Both roots' lanes through one shared buffer, one after the other.
  EXPECT_EQ(count(ks.source, "__shared__ float sh"), 1u);
  EXPECT_TRUE(
      contains(ks.source, "ln_col_partial1[s * 768 + o4 + e] = acc1_[e];"));
  EXPECT_TRUE(contains(
      ks.source, "amLast = atomicAdd(&ln_col_ticket[t], 1u) == 128 - 1;"));
  EXPECT_TRUE(contains(ks.source, "ln_col_ticket[t] = 0;"));
  EXPECT_TRUE(contains(ks.source, "out1[o] = res1;"));
  expectCompiles(ks);
}

TEST(FusionReduce, GlobalSumOfSquaresSplitsAcrossBlocks) {
  // A gradient norm: sqrt(sum(g * g)) over 2^18 elements.
  KernelSource ks = firstKernel(fusionFn(
      "%g: tensor<512x512xf32>",
      R"(step.fusion "reduction" (%g) : (tensor<512x512xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<512x512xf32>):
    %0 = step.mul %a, %a : tensor<512x512xf32>
    %1 = step.reduce_sum %0 dims = [0, 1] : tensor<512x512xf32> -> tensor<f32>
    %2 = step.sqrt %1 : tensor<f32>
    step.yield %2 : tensor<f32>
  })", "tensor<f32>"), "red_split");
  EXPECT_EQ(ks.gridX, 16); // 2^18 / 16384 blocks for the one output
  EXPECT_TRUE(contains(ks.source, "__device__ float red_split_partial0[1 * 16];"));
  EXPECT_TRUE(contains(ks.source, "red_split_ticket[o] = 0;"));
  EXPECT_TRUE(contains(ks.source, "r0 = sqrtf(a0);"));
  EXPECT_TRUE(contains(ks.source, "out0[o] = fv")); // o is 0
  expectCompiles(ks);
}

TEST(FusionReduce, IntegerCountAndSizeOneReduction) {
  KernelSource ks = firstKernel(fusionFnN(
      "%y: tensor<8x16xi64>, %x: tensor<8x1xf32>",
      R"(step.fusion "reduction" (%y) : (tensor<8x16xi64>) -> (tensor<8xi32>) {
  ^bb0(%t: tensor<8x16xi64>):
    %0 = step.cast %t : tensor<8x16xi64> -> tensor<8x16xi32>
    %1 = step.reduce_sum %0 dims = [1] : tensor<8x16xi32> -> tensor<8xi32>
    step.yield %1 : tensor<8xi32>
  })", {"tensor<8xi32>"}), "red_int");
  EXPECT_TRUE(contains(ks.source, "unsigned int acc0 = 0;"));
  EXPECT_TRUE(contains(ks.source, "SumOp()(acc0, (unsigned int)fv"));
  EXPECT_TRUE(contains(ks.source, "= (int)acc0;"));
  expectCompiles(ks);
  ks = firstKernel(fusionFn(
      "%x: tensor<8x1xf32>",
      R"(step.fusion "reduction" (%x) : (tensor<8x1xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8x1xf32>):
    %0 = step.neg %a : tensor<8x1xf32>
    %1 = step.reduce_sum %0 dims = [1] : tensor<8x1xf32> -> tensor<8xf32>
    step.yield %1 : tensor<8xf32>
  })", "tensor<8xf32>"), "red_one");
  EXPECT_FALSE(contains(ks.source, "SumOp()(")); // a copy: -0.0 stays -0.0
  EXPECT_TRUE(contains(ks.source, "r0 = -a0;"));
  expectCompiles(ks);
}

//===----------------------------------------------------------------------===//
// reduction: row-op roots
//===----------------------------------------------------------------------===//

TEST(FusionRowOp, ScaledSoftmaxCastOnStore) {
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<8x64xf32>, %s: tensor<f32>",
      R"(step.fusion "reduction" (%x, %s) : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xbf16> {
  ^bb0(%a: tensor<8x64xf32>, %c: tensor<f32>):
    %0 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<8x64xf32>
    %1 = step.mul %a, %0 : tensor<8x64xf32>
    %2 = step.softmax %1 dim = 1 : tensor<8x64xf32>
    %3 = step.cast %2 : tensor<8x64xf32> -> tensor<8x64xbf16>
    step.yield %3 : tensor<8x64xbf16>
  })", "tensor<8x64xbf16>"), "row_sm");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "out0"}));
  EXPECT_EQ(ks.gridX, 1); // a warp per row, as the unfused softmax
  EXPECT_EQ(ks.blockX, 256);
  // The row is read through the prologue, three times (max, sum, output).
  EXPECT_EQ(count(ks.source, "row_sm_x(in0, in1, out0, base + (long long)j * 1)"),
            3u);
  EXPECT_TRUE(contains(ks.source, "r0 = a0 * a1;"));
  EXPECT_TRUE(contains(ks.source, "mx = rowReduce<true>(mx, MaxNaNOp()"));
  EXPECT_TRUE(contains(ks.source, "row_sm_store(in0, in1, out0, base + (long "
                                  "long)j * 1, expf(x - mx) / sum);"));
  EXPECT_TRUE(contains(ks.source, "out0[idx] = fs")); // rounded once
  EXPECT_FALSE(contains(ks.source, "in0[base")); // no raw read of x
  expectCompiles(ks);
}

TEST(FusionRowOp, LogSoftmaxOverAnOuterDim) {
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<6x5xf16>, %y: tensor<6x5xf16>",
      R"(step.fusion "reduction" (%x, %y) : (tensor<6x5xf16>, tensor<6x5xf16>) -> tensor<6x5xf16> {
  ^bb0(%a: tensor<6x5xf16>, %b: tensor<6x5xf16>):
    %0 = step.sub %a, %b : tensor<6x5xf16>
    %1 = step.log_softmax %0 dim = 0 : tensor<6x5xf16>
    step.yield %1 : tensor<6x5xf16>
  })", "tensor<6x5xf16>"), "row_lsm");
  EXPECT_EQ(ks.gridX, 1); // 5 rows (columns of x): a warp each
  EXPECT_TRUE(contains(ks.source, "row_lsm_x(in0, in1, out0, base + (long long)j * 5)"));
  EXPECT_TRUE(contains(ks.source, "x - mx - lse"));
  // The prologue's f16 result is rounded, as the unfused sub's store.
  EXPECT_TRUE(contains(ks.source, " = __float2half_rn(r0);\n"));
  EXPECT_TRUE(contains(ks.source, " = __half2float(fs"));
  EXPECT_TRUE(contains(ks.source, "const float res = __half2float(__float2half_rn(value));"));
  expectCompiles(ks);
}

TEST(FusionRowOp, ResidualLayerNormWithGeluEpilogue) {
  // x + residual -> layer_norm(gamma, beta) -> (normalized, gelu(normalized)).
  KernelSource ks = firstKernel(fusionFnN(
      "%x: tensor<4x8x32xf32>, %res: tensor<4x8x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>",
      R"(step.fusion "reduction" (%x, %res, %w, %b) : (tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x8x32xf32>, tensor<4x8x32xf32>) {
  ^bb0(%a: tensor<4x8x32xf32>, %c: tensor<4x8x32xf32>, %g: tensor<32xf32>, %h: tensor<32xf32>):
    %0 = step.add %a, %c : tensor<4x8x32xf32>
    %1 = step.layer_norm %0, %g, %h eps = 1.0e-05 : tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>
    %2 = step.gelu %1 approximate tanh : tensor<4x8x32xf32>
    step.yield %1, %2 : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  })", {"tensor<4x8x32xf32>", "tensor<4x8x32xf32>"}), "row_ln");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "in2", "in3", "out0", "out1"}));
  EXPECT_EQ(ks.gridX, 4); // 32 rows, 8 per block
  EXPECT_TRUE(contains(ks.source, "row_ln_x(in0, in1, in2, in3, out0, out1, row * 32 + j)"));
  EXPECT_TRUE(contains(ks.source, "rstd * in2[j] + in3[j]")); // gamma, beta
  EXPECT_TRUE(contains(ks.source, "0.044715f"));
  EXPECT_TRUE(contains(ks.source, "out0[idx] = res;"));
  EXPECT_TRUE(contains(ks.source, "out1[idx] = "));
  expectCompiles(ks);
}

TEST(FusionRowOp, CrossEntropyMeanOfBf16LogitsTimesLossScale) {
  // Labels first: operand 1 of the root is the fusion's in0.
  KernelSource ks = firstKernel(fusionFn(
      "%y: tensor<8xi64>, %x: tensor<8x50xbf16>, %s: tensor<f32>",
      R"(step.fusion "reduction" (%y, %x, %s) : (tensor<8xi64>, tensor<8x50xbf16>, tensor<f32>) -> tensor<f32> {
  ^bb0(%t: tensor<8xi64>, %a: tensor<8x50xbf16>, %c: tensor<f32>):
    %0 = step.cast %a : tensor<8x50xbf16> -> tensor<8x50xf32>
    %1 = step.cross_entropy %0, %t reduction = mean : tensor<8x50xf32>, tensor<8xi64> -> tensor<f32>
    %2 = step.mul %1, %c : tensor<f32>
    step.yield %2 : tensor<f32>
  })", "tensor<f32>"), "row_ce");
  EXPECT_TRUE(contains(ks.source, "const long long t = (long long)in0[row];"));
  EXPECT_TRUE(contains(ks.source, "row_ce_x(in0, in1, in2, out0, row * 50 + (t < 0 || t >= 50 ? 0 : t))"));
  EXPECT_TRUE(contains(ks.source, "__device__ unsigned int row_ce_ticket;"));
  EXPECT_TRUE(contains(
      ks.source, "row_ce_store(in0, in1, in2, out0, 0, total / (float)rows);"));
  EXPECT_TRUE(contains(ks.source, "const float fh")); // the scale, hoisted
  expectCompiles(ks);
}

TEST(FusionRowOp, CrossEntropyGradWithPrologueAndPerRowScale) {
  KernelSource ks = firstKernel(fusionFn(
      "%x: tensor<8x40xf32>, %m: tensor<8x40xf32>, %y: tensor<8xi32>, %g: tensor<8xf32>",
      R"(step.fusion "reduction" (%x, %m, %y, %g) : (tensor<8x40xf32>, tensor<8x40xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x40xbf16> {
  ^bb0(%a: tensor<8x40xf32>, %b: tensor<8x40xf32>, %t: tensor<8xi32>, %d: tensor<8xf32>):
    %0 = step.add %a, %b : tensor<8x40xf32>
    %1 = step.cross_entropy_grad %0, %t, %d reduction = none : tensor<8x40xf32>, tensor<8xi32>, tensor<8xf32> -> tensor<8x40xf32>
    %2 = step.cast %1 : tensor<8x40xf32> -> tensor<8x40xbf16>
    step.yield %2 : tensor<8x40xbf16>
  })", "tensor<8x40xbf16>"), "row_ceg");
  EXPECT_TRUE(contains(ks.source, "const float s = in3[row];"));
  EXPECT_TRUE(contains(ks.source, "row_ceg_store(in0, in1, in2, in3, out0, row * 40 + j, 0.0f);"));
  EXPECT_TRUE(
      contains(ks.source,
               "row_ceg_store(in0, in1, in2, in3, out0, row * 40 + j, v[u]);"));
  EXPECT_FALSE(contains(ks.source, "uint4")); // the prologue computes
  expectCompiles(ks);
}

// AMP's classifier gradient: bf16 logits widened (through a reshape) and
// the f32 gradient rounded to bf16. The prologue only widens and the store
// only rounds, so the rows move in 16-byte vectors of 8 elements.
TEST(FusionRowOp, CrossEntropyGradOfWidenedLogitsMovesVectors) {
  KernelSource ks = firstKernel(
      fusionFn(
          "%x: tensor<2x4x48xbf16>, %y: tensor<8xi64>, %g: tensor<f32>",
          R"(step.fusion "reduction" (%x, %y, %g) : (tensor<2x4x48xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x48xbf16> {
  ^bb0(%a: tensor<2x4x48xbf16>, %t: tensor<8xi64>, %d: tensor<f32>):
    %0 = step.reshape %a : tensor<2x4x48xbf16> -> tensor<8x48xbf16>
    %1 = step.cast %0 : tensor<8x48xbf16> -> tensor<8x48xf32>
    %2 = step.cross_entropy_grad %1, %t, %d reduction = mean : tensor<8x48xf32>, tensor<8xi64>, tensor<f32> -> tensor<8x48xf32>
    %3 = step.cast %2 : tensor<8x48xf32> -> tensor<8x48xbf16>
    step.yield %3 : tensor<8x48xbf16>
  })",
          "tensor<8x48xbf16>"),
      "row_cev");
  EXPECT_TRUE(contains(ks.source, "for (int j0 = threadIdx.x * 8; j0 < 48;"));
  EXPECT_TRUE(contains(
      ks.source, "w_ = *reinterpret_cast<const uint4 *>(in0 + row * 48 + j);"));
  EXPECT_TRUE(contains(
      ks.source,
      "__stcs(reinterpret_cast<uint4 *>(out0 + row * 48 + j), make_uint4("));
  // A mean: the targets not ignored counted once by a one-block launch,
  // read by the rows' launch (a block per row).
  EXPECT_EQ(ks.gridX, 1);
  EXPECT_EQ(ks.sharedBytes, 0);
  ASSERT_EQ(ks.then.size(), 1u);
  EXPECT_EQ(ks.then[0].suffix, "_rows");
  EXPECT_EQ(ks.then[0].gridX, 8);
  EXPECT_EQ(count(ks.source, "count += (long long)in1[r] != -100ll;"), 1u);
  EXPECT_TRUE(contains(ks.source, "__device__ int row_cev_live[1];"));
  EXPECT_TRUE(contains(ks.source, "    row_cev_live[0] = count;"));
  EXPECT_TRUE(contains(ks.source, "row_cev_rows("));
  EXPECT_TRUE(contains(ks.source, "  const int count = row_cev_live[0];"));
  // The row (96 bytes) kept in shared memory between the sweeps: the first
  // sweep reads it from global memory once and keeps each vector, the
  // second reads it back from the thread's own slots.
  EXPECT_EQ(ks.then[0].sharedBytes, 96);
  EXPECT_EQ(count(ks.source, "reinterpret_cast<const uint4 *>(in0"), 1u);
  EXPECT_TRUE(contains(ks.source, "row_[j >> 3] = w_;"));
  EXPECT_TRUE(contains(ks.source, "w_ = row_[j >> 3];"));
  // The vector's words packed from the rounded values (by value: the
  // 16-byte store stays one st.global.v4).
  EXPECT_TRUE(contains(
      ks.source,
      "(unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v[h * 8 + 6])) | "
      "(unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v[h * 8 + 7])) "
      "<< 16)"));
  // Ignored rows still store through the epilogue.
  EXPECT_TRUE(contains(
      ks.source, "row_cev_store(in0, in1, in2, out0, row * 48 + j, 0.0f);"));
  expectCompiles(ks);
}

// step-fuse-loss: the loss and its gradient of the same widened logits in
// one kernel, the gradient's: one sweep of statistics per row, thread 0
// adds the row's loss to the block's partial, the last block stores the
// mean in out0; the gradient still moves 16-byte vectors, into out1.
TEST(FusionRowOp, CrossEntropyAndItsGradientShareOneKernel) {
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<8x48xbf16>, %y: tensor<8xi64>, %g: tensor<f32>",
          R"(step.fusion "reduction" (%x, %y, %g) : (tensor<8x48xbf16>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x48xbf16>) {
  ^bb0(%a: tensor<8x48xbf16>, %t: tensor<8xi64>, %d: tensor<f32>):
    %0 = step.cast %a : tensor<8x48xbf16> -> tensor<8x48xf32>
    %1 = step.cross_entropy %0, %t reduction = mean : tensor<8x48xf32>, tensor<8xi64> -> tensor<f32>
    %2 = step.cross_entropy_grad %0, %t, %d reduction = mean : tensor<8x48xf32>, tensor<8xi64>, tensor<f32> -> tensor<8x48xf32>
    %3 = step.cast %2 : tensor<8x48xf32> -> tensor<8x48xbf16>
    step.yield %1, %3 : tensor<f32>, tensor<8x48xbf16>
  })",
          {"tensor<f32>", "tensor<8x48xbf16>"}),
      "pair");
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "in2", "out0", "out1"}));
  // The mean's count first (one block), then the gradient's rows, a block
  // per row.
  EXPECT_EQ(ks.gridX, 1);
  ASSERT_EQ(ks.then.size(), 1u);
  EXPECT_EQ(ks.then[0].gridX, 8);
  size_t merge = ks.source.find("ceBlockMerge(mx, sum, sh, sh2);");
  ASSERT_NE(merge, std::string::npos);
  EXPECT_EQ(ks.source.find("ceBlockMerge(mx, sum, sh, sh2);", merge + 1),
            std::string::npos);
  EXPECT_TRUE(contains(ks.source, "part += bad ? __int_as_float(0x7fc00000) : "
                                  "mx + logf(sum) - pair_x("));
  EXPECT_TRUE(contains(ks.source, "__device__ float pair_partial[8];"));
  EXPECT_TRUE(contains(ks.source, "pair_lstore(in0, in1, in2, out0, out1, 0, "
                                  "total / (float)rows);"));
  EXPECT_TRUE(contains(
      ks.source,
      "__stcs(reinterpret_cast<uint4 *>(out1 + row * 48 + j), make_uint4("));
  // The gradient's store leaves out0 alone, the loss's out1.
  size_t lstore = ks.source.find("pair_lstore(");
  ASSERT_NE(lstore, std::string::npos);
  EXPECT_EQ(count(ks.source.substr(0, lstore), "out0[idx]"), 0u) << ks.source;
  EXPECT_TRUE(contains(ks.source.substr(lstore), "out0[idx] = res;"));
  EXPECT_FALSE(contains(ks.source.substr(lstore), "out1[idx]"));
  expectCompiles(ks);
}

// A per-row loss (reduction none) is stored by thread 0 of its row's
// block, 0 for an ignored row; no partials.
TEST(FusionRowOp, CrossEntropyRowsAndTheirGradient) {
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<4x10xf32>, %y: tensor<4xi32>, %g: tensor<4xf32>",
          R"(step.fusion "reduction" (%x, %y, %g) : (tensor<4x10xf32>, tensor<4xi32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4x10xf32>) {
  ^bb0(%a: tensor<4x10xf32>, %t: tensor<4xi32>, %d: tensor<4xf32>):
    %1 = step.cross_entropy %a, %t reduction = none ignore_index = 3 : tensor<4x10xf32>, tensor<4xi32> -> tensor<4xf32>
    %2 = step.cross_entropy_grad %a, %t, %d reduction = none ignore_index = 3 : tensor<4x10xf32>, tensor<4xi32>, tensor<4xf32> -> tensor<4x10xf32>
    step.yield %1, %2 : tensor<4xf32>, tensor<4x10xf32>
  })",
          {"tensor<4xf32>", "tensor<4x10xf32>"}),
      "rows");
  EXPECT_TRUE(contains(ks.source,
                       "rows_lstore(in0, in1, in2, out0, out1, row, 0.0f);"));
  EXPECT_TRUE(contains(ks.source,
                       "rows_lstore(in0, in1, in2, out0, out1, row, bad ? "));
  EXPECT_FALSE(contains(ks.source, "_partial")) << ks.source;
  expectCompiles(ks);
}

// The loss through an epilogue (gradient accumulation averages it with the
// micro-batches before): the loss's store computes it, with the seed read
// at index 0.
TEST(FusionRowOp, ALossEpilogueIsComputedByTheLossStore) {
  KernelSource ks = firstKernel(
      fusionFnN(
          "%x: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>",
          R"(step.fusion "reduction" (%x, %y, %g) : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>) {
  ^bb0(%a: tensor<4x10xf32>, %t: tensor<4xi64>, %d: tensor<f32>):
    %1 = step.cross_entropy %a, %t reduction = sum : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
    %2 = step.cross_entropy_grad %a, %t, %d reduction = sum : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
    %3 = step.mul %1, %d : tensor<f32>
    step.yield %3, %2 : tensor<f32>, tensor<4x10xf32>
  })",
          {"tensor<f32>", "tensor<4x10xf32>"}),
      "epi");
  size_t lstore = ks.source.find("epi_lstore(");
  ASSERT_NE(lstore, std::string::npos);
  std::string fn =
      ks.source.substr(lstore, ks.source.find("\n}\n", lstore) - lstore);
  EXPECT_TRUE(contains(fn, "in2[")) << fn; // the seed, read by the epilogue
  EXPECT_TRUE(contains(fn, "out0[idx] = ")) << fn;
  EXPECT_TRUE(
      contains(ks.source, "epi_lstore(in0, in1, in2, out0, out1, 0, total);"));
  expectCompiles(ks);
}

// What step-fuse-loss never forms, codegen refuses with a message: a
// gradient of other logits, and a result reading both the loss and the
// gradient.
TEST(FusionRowOp, ALossAndGradientPairMustShareLogitsAndKeepApart) {
  const char *other =
      R"(step.fusion "reduction" (%x, %y, %g) : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>) {
  ^bb0(%a: tensor<4x10xf32>, %t: tensor<4xi64>, %d: tensor<f32>):
    %0 = step.neg %a : tensor<4x10xf32>
    %1 = step.cross_entropy %a, %t reduction = sum : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
    %2 = step.cross_entropy_grad %0, %t, %d reduction = sum : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
    step.yield %1, %2 : tensor<f32>, tensor<4x10xf32>
  })";
  const char *both =
      R"(step.fusion "reduction" (%x, %y, %g) : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>) {
  ^bb0(%a: tensor<4x10xf32>, %t: tensor<4xi64>, %d: tensor<f32>):
    %1 = step.cross_entropy %a, %t reduction = sum : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
    %2 = step.cross_entropy_grad %a, %t, %d reduction = sum : tensor<4x10xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x10xf32>
    %3 = step.broadcast_in_dim %1, dims = [] : tensor<f32> -> tensor<4x10xf32>
    %4 = step.add %2, %3 : tensor<4x10xf32>
    step.yield %1, %4 : tensor<f32>, tensor<4x10xf32>
  })";
  for (auto [body, why] : {std::pair{other, "must read the same logits"},
                           std::pair{both, "must have the loss's size"}}) {
    Parsed p = parse(
        fusionFnN("%x: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>",
                  body, {"tensor<f32>", "tensor<4x10xf32>"}));
    ASSERT_TRUE(p.module);
    auto f =
        mlir::cast<mlir::step::FusionOp>(p.func().getBody().front().front());
    try {
      detail::emitFusionKernel(f, "k");
      ADD_FAILURE() << "accepted: " << body;
    } catch (const step::rt::Error &e) {
      EXPECT_TRUE(contains(e.what(), why)) << e.what();
    }
  }
}

TEST(FusionRowOp, RowOperandsOtherThanTheRowMustBeInputs) {
  Parsed p = parse(fusionFn(
      "%x: tensor<4x8xf32>, %w: tensor<8xf32>",
      R"(step.fusion "reduction" (%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %g: tensor<8xf32>):
    %0 = step.neg %g : tensor<8xf32>
    %1 = step.layer_norm %a, %0, %g eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
    step.yield %1 : tensor<4x8xf32>
  })", "tensor<4x8xf32>"));
  ASSERT_TRUE(p.module);
  mlir::Operation &op = p.func().getBody().front().front();
  try {
    emitKernel(&op, "k");
    ADD_FAILURE() << "a prologue on gamma was accepted";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "codegen: operand 1 of 'step.layer_norm'"))
        << e.what();
  }
}

TEST(FusionDispatch, MatmulFusionsNeedNoKernel) {
  Parsed p = parse(fusionFn(
      "%x: tensor<4x8xf32>, %w: tensor<8x16xf32>",
      R"(step.fusion "matmul" (%x, %w) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>):
    %0 = step.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %1 = step.relu %0 : tensor<4x16xf32>
    step.yield %1 : tensor<4x16xf32>
  })", "tensor<4x16xf32>"));
  ASSERT_TRUE(p.module);
  EXPECT_FALSE(emitKernel(&p.func().getBody().front().front(), "k"));
}

} // namespace
