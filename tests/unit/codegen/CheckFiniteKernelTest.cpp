//===- CheckFiniteKernelTest.cpp - The kernel of step.check_finite --------===//
//
// One kernel over all operands (CheckFiniteKernels.cpp): the segment of
// each tensor, 16-byte loads where the byte size allows, the bit tests of
// each float type, the block vote, the flag and the self-resetting ticket;
// NVRTC compiles it for sm_80 and sm_90. The grid is capped and the kernel
// loops over its virtual blocks; too many operands are refused. No GPU.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "runtime/Tensor.h"

namespace {
using namespace step::codegen;
using namespace step::codegen::test;

/// A module whose @f is one step.check_finite over arguments of `types`.
std::string checkFiniteModule(const std::vector<std::string> &types) {
  std::string args, operands, opTypes;
  for (size_t i = 0; i < types.size(); ++i) {
    std::string sep = i ? ", " : "", I = std::to_string(i);
    args += sep + "%x" + I + ": " + types[i];
    operands += sep + "%x" + I;
    opTypes += sep + types[i];
  }
  return "func.func @f(" + args + ") -> tensor<i1> {\n  %ok = "
         "step.check_finite " + operands + " : " + opTypes +
         "\n  return %ok : tensor<i1>\n}\n";
}

TEST(CheckFiniteKernel, OneKernelOverEveryOperandWithATicket) {
  KernelSource ks = firstKernel(checkFiniteModule(
      {"tensor<100000xf32>", "tensor<7xbf16>", "tensor<0x4xf16>",
       "tensor<2x4xf16>"}));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(ks.params, (std::vector<std::string>{"in0", "in1", "in2", "in3",
                                                 "out0"}));
  // 400000 bytes: 13 chunks of 1924 uint4 loads; 7 bf16 (14 bytes): one
  // chunk, element by element; the empty tensor: none; 8 f16: one load.
  EXPECT_EQ(ks.gridX, 15);
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(contains(
      s, "// tensor 0: 100000 f32 elements, 13 chunks of 1924 loads "
         "(16 bytes per load)"))
      << s;
  EXPECT_TRUE(contains(s, "// tensor 1: 7 bf16 elements, 1 chunks of 7 "
                          "loads (one element per load)"));
  EXPECT_FALSE(contains(s, "// tensor 2:"));
  EXPECT_TRUE(contains(s, "// tensor 3: 8 f16 elements, 1 chunks of 1 loads"));
  EXPECT_TRUE(
      contains(s, "const uint4 *p = reinterpret_cast<const uint4 *>(in0);"));
  EXPECT_TRUE(contains(s, "const unsigned short *p = reinterpret_cast<const "
                          "unsigned short *>(in1);"));
  // Exponent all ones, per type: f32 words, bf16 and f16 halves.
  EXPECT_TRUE(contains(s, "ok = finite32(w.x) && finite32(w.y) && "
                          "finite32(w.z) && finite32(w.w);"));
  EXPECT_TRUE(contains(s, "ok = finite16(w, 0x7f80u);"));
  EXPECT_TRUE(contains(s, "finite16x2(w.w, 0x7c00u)"));
  // Virtual blocks walked with a grid stride; segments found by bisection.
  EXPECT_TRUE(contains(s, "vb < 15u; vb += gridDim.x"));
  EXPECT_TRUE(contains(s, "if (vb < 13u) {"));
  // Block vote, flag, last-block ticket that resets itself and the flag.
  EXPECT_TRUE(contains(s, "__syncthreads_and(ok)"));
  EXPECT_TRUE(contains(s, "__device__ unsigned int k_ticket;"));
  EXPECT_TRUE(contains(s, "__device__ unsigned int k_found;"));
  EXPECT_TRUE(contains(s, "atomicOr(&k_found, 1u);"));
  EXPECT_TRUE(
      contains(s, "amLast = atomicAdd(&k_ticket, 1u) == gridDim.x - 1;"));
  EXPECT_TRUE(
      contains(s, "out0[0] = atomicExch(&k_found, 0u) == 0u ? 1 : 0;"));
  EXPECT_TRUE(contains(s, "k_ticket = 0;"));
  EXPECT_LT(s.find("__threadfence(); // the flag"),
            s.find("atomicAdd(&k_ticket"));
  expectCubinsForSm80AndSm90(ks);
}

// Tensors whose test differs only in pointer and chunk numbers share one
// copy of it (SharedSegments.h): three f32 tensors read 16 bytes a load,
// two bf16 ones an element a load; no tensor inlined.
TEST(CheckFiniteKernel, TensorsOfEqualCodeShareOneCopy) {
  KernelSource ks = firstKernel(checkFiniteModule(
      {"tensor<100000xf32>", "tensor<7xbf16>", "tensor<4096xf32>",
       "tensor<9xbf16>", "tensor<8xf32>"}));
  const std::string &s = ks.source;
  ASSERT_FALSE(s.empty());
  EXPECT_TRUE(contains(s, "    int code = -1, seg = -1;\n")) << s;
  EXPECT_TRUE(contains(s, "    if (code == 0) { // tensors 0, 2, 4\n"));
  EXPECT_TRUE(contains(s, "    else if (code == 1) { // tensors 1, 3\n"));
  EXPECT_EQ(count(s, "ok = finite32(w.x)"), 1);
  EXPECT_EQ(count(s, "ok = finite16(w, 0x7f80u);"), 1);
  // Tensor 2: 4096 f32, 1024 uint4 loads in one chunk, virtual block 14.
  EXPECT_TRUE(contains(s, "case 2: sin0 = in2; segStart = 14u; segChunk = "
                          "1024; segWork = 1024; break;"));
  EXPECT_TRUE(contains(s, "const uint4 *p = reinterpret_cast<const uint4 "
                          "*>(sin0);"));
  expectCubinsForSm80AndSm90(ks);
}

TEST(CheckFiniteKernel, OnlyEmptyOperandsWriteTrue) {
  KernelSource ks =
      firstKernel(checkFiniteModule({"tensor<0xf32>", "tensor<3x0xbf16>"}));
  EXPECT_EQ(ks.gridX, 1);
  EXPECT_FALSE(contains(ks.source, "vb"));
  EXPECT_TRUE(contains(ks.source, "k_ticket = 0;"));
  expectCubinsForSm80AndSm90(ks);
}

TEST(CheckFiniteKernel, GridIsCappedAndLoopsOverVirtualBlocks) {
  // Five 32 MiB gradients: 1024 chunks each, 5120 virtual blocks.
  KernelSource ks = firstKernel(checkFiniteModule(
      std::vector<std::string>(5, "tensor<8388608xf32>")));
  EXPECT_EQ(ks.gridX, 4096);
  EXPECT_TRUE(contains(ks.source, "vb < 5120u; vb += gridDim.x"));
  EXPECT_TRUE(contains(ks.source, "1024 chunks of 2048 loads"));
  // Long long indices are not needed: 2^21 loads per tensor.
  EXPECT_FALSE(contains(ks.source, "long long"));
  expectCubinsForSm80AndSm90(ks);
}

TEST(CheckFiniteKernel, TooManyOperandsAreRefused) {
  Parsed p = parse(checkFiniteModule(
      std::vector<std::string>(600, "tensor<4xf32>")));
  ASSERT_TRUE(p.module);
  mlir::Operation &op = p.func().getBody().front().front();
  try {
    emitKernel(&op, "k");
    ADD_FAILURE() << "600 operands were accepted";
  } catch (const step::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "600 operands need 4808 bytes"))
        << e.what();
  }
}

} // namespace
