//===- NNKernelTest.cpp - What the neural-network ops' kernels bake in ---===//
//
// cross_entropy and its gradient, embedding_grad, attention and its
// gradient (CUDA cores, wmma and mma.sync tensor cores, valid lengths,
// saved statistics): launch sizes, shared memory and the strategy each
// source holds. NvrtcTest.cpp compiles the same kernels.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

namespace {
using namespace step::codegen;
using namespace step::codegen::test;

/// The kernel of `step.attention_grad` (attributes `attrs`, e.g. "causal")
/// of q, k, v and g of these tensor types, named `name`.
std::optional<KernelSource>
attentionGrad(const std::string &q, const std::string &k, const std::string &v,
              const std::string &g, const std::string &attrs,
              const std::string &name) {
  Parsed p = parse("func.func @f(%q: " + q + ", %k: " + k + ", %v: " + v +
                   ", %g: " + g + ") -> " + v +
                   " {\n  %r:3 = step.attention_grad %q, %k, %v, %g " + attrs +
                   " : " + q + ", " + k + ", " + v + ", " + g + " -> " + q +
                   ", " + k + ", " + v + "\n  return %r#2 : " + v + "\n}\n");
  return emitKernel(&p.func().getBody().front().front(), name);
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

TEST(NNKernels, CrossEntropyAndItsGradient) {
  KernelSource ks = firstKernel(
      fn("%l: tensor<32x10xf32>, %y: tensor<32xi64>",
         "step.cross_entropy %l, %y reduction = mean : tensor<32x10xf32>, "
         "tensor<32xi64> -> tensor<f32>",
         "tensor<f32>"),
      "ce");
  EXPECT_EQ(ks.gridX, 32);
  EXPECT_TRUE(contains(ks.source, "__device__ float ce_partial[32];"));
  EXPECT_TRUE(contains(ks.source, "t == -100ll"));
  EXPECT_TRUE(contains(ks.source, "total / (float)rows"));
  ks = firstKernel(
      fn("%l: tensor<32x10xf32>, %y: tensor<32xi32>, %g: tensor<f32>",
         "step.cross_entropy_grad %l, %y, %g reduction = sum ignore_index = 3"
         " : tensor<32x10xf32>, tensor<32xi32>, tensor<f32> -> "
         "tensor<32x10xf32>",
         "tensor<32x10xf32>"));
  EXPECT_EQ(ks.params, (Params{"in0", "in1", "in2", "out0"}));
  EXPECT_TRUE(contains(ks.source, "t == 3ll"));
  EXPECT_TRUE(contains(ks.source, "const float s = in2[0];"));
  EXPECT_FALSE(contains(ks.source, "(float)count")); // only for mean
  EXPECT_EQ(ks.sharedBytes, 0); // f32 rows: no vectors, not staged
  // bf16 rows: vectors, kept in shared memory between the sweeps up to
  // 112 KB a row (57344 elements), 512 threads; past it re-read, 256.
  for (auto [c, staged] : {std::pair{57344, true}, {57352, false}}) {
    std::string l = "tensor<2x" + std::to_string(c) + "xbf16>";
    ks = firstKernel(
        fn("%l: " + l + ", %y: tensor<2xi64>, %g: tensor<bf16>",
           "step.cross_entropy_grad %l, %y, %g reduction = sum : " + l +
               ", tensor<2xi64>, tensor<bf16> -> " + l,
           l));
    EXPECT_EQ(ks.sharedBytes, staged ? 2 * c : 0) << c;
    EXPECT_EQ(ks.blockX, staged ? 512 : 256) << c;
    EXPECT_EQ(contains(ks.source, "w_ = row_[j >> 3];"), staged) << c;
    EXPECT_TRUE(contains(ks.source, "reinterpret_cast<const uint4 *>(in0"));
  }
}

TEST(NNKernels, EmbeddingGradSortsThePositionsOnce) {
  KernelSource ks = firstKernel(
      fn("%i: tensor<4x16xi64>, %g: tensor<4x16x600xf32>",
         "step.embedding_grad %i, %g num_embeddings = 50 : tensor<4x16xi64>, "
         "tensor<4x16x600xf32> -> tensor<50x600xf32>",
         "tensor<50x600xf32>"));
  // Launch 1: one block sorts the 64 keys in shared memory.
  EXPECT_EQ(ks.gridX, 1);
  EXPECT_EQ(ks.blockX, 1024);
  EXPECT_EQ(ks.sharedBytes, 64 * 4);
  // Launch 2: a block per table row and 256 columns (600 columns: 3)
  // reads its run of sorted positions.
  ASSERT_EQ(ks.then.size(), 1u);
  EXPECT_EQ(ks.then[0].suffix, "_rows");
  EXPECT_EQ(ks.then[0].gridX, 50 * 3);
  EXPECT_EQ(ks.then[0].blockX, 256);
  EXPECT_TRUE(
      contains(ks.source, "__device__ unsigned " + ks.name + "_keys[64];"));
  EXPECT_TRUE(
      contains(ks.source, "__device__ int " + ks.name + "_start[50 + 1];"));
  EXPECT_TRUE(contains(ks.source, "const long long v = w / 3;"));
  EXPECT_TRUE(contains(ks.source, "float g_[16];")); // 16 loads in flight
  EXPECT_FALSE(contains(ks.source, "__ballot_sync"));
  EXPECT_FALSE(contains(ks.source, "atomicAdd"));
}

TEST(NNKernels, EmbeddingGradOfManyPositionsScansPerRow) {
  // 20,000 positions: more keys than the sort keeps in shared memory.
  KernelSource ks = firstKernel(
      fn("%i: tensor<4x5000xi32>, %g: tensor<4x5000x8xf32>",
         "step.embedding_grad %i, %g num_embeddings = 50 : tensor<4x5000xi32>, "
         "tensor<4x5000x8xf32> -> tensor<50x8xf32>",
         "tensor<50x8xf32>"));
  EXPECT_EQ(ks.gridX, 50); // one block per table row
  EXPECT_EQ(ks.blockX, 256);
  EXPECT_TRUE(ks.then.empty());
  EXPECT_TRUE(contains(ks.source, "__ballot_sync"));
  EXPECT_FALSE(contains(ks.source, "atomicAdd"));
}

TEST(NNKernels, EmbeddingGradOfNoPositionsScans) {
  // No keys to sort (a zero-sized __device__ array would not compile): the
  // scanning kernel, which writes the zero rows.
  KernelSource ks = firstKernel(
      fn("%i: tensor<0xi64>, %g: tensor<0x8xf32>",
         "step.embedding_grad %i, %g num_embeddings = 5 : tensor<0xi64>, "
         "tensor<0x8xf32> -> tensor<5x8xf32>",
         "tensor<5x8xf32>"));
  EXPECT_TRUE(ks.then.empty());
  EXPECT_FALSE(contains(ks.source, "_keys["));
}

TEST(NNKernels, AttentionIsTiledWithAnOnlineSoftmax) {
  KernelSource ks =
      firstKernel(fn("%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x24x8xf32>, "
                     "%v: tensor<2x4x24x12xf32>",
                     "step.attention %q, %k, %v causal : tensor<2x4x16x8xf32>, "
                     "tensor<2x4x24x8xf32>, tensor<2x4x24x12xf32> -> "
                     "tensor<2x4x16x12xf32>",
                     "tensor<2x4x16x12xf32>"));
  EXPECT_EQ(ks.gridX, 8); // a block per (slice, 64-row query tile)
  EXPECT_EQ(ks.blockX, 256);
  // Q and K tiles (rows padded to 9 floats), V (13), P (64 x 65).
  EXPECT_EQ(ks.sharedBytes, 4 * (64 * (9 + 9 + 13) + 64 * 65));
  EXPECT_TRUE(ks.then.empty());
  EXPECT_TRUE(contains(ks.source, "0.353553385f")); // 1 / sqrt(8)
  EXPECT_TRUE(contains(ks.source, "true ? min(lk_, i0 + 64) : lk_"));
  EXPECT_TRUE(contains(ks.source, "float m[4], l[4], acc[4][1];"));
  EXPECT_FALSE(contains(ks.source, "atomic"));
  // No valid length: the rows and keys computed are constants.
  EXPECT_TRUE(contains(ks.source, "const int lq_ = 16, lk_ = 24;"));
  // A head too wide to stage 16-row tiles: a block per query row.
  KernelSource wide = firstKernel(
      fn("%q: tensor<3x4x2048xf32>, %k: tensor<3x5x2048xf32>, "
         "%v: tensor<3x5x8xf32>",
         "step.attention %q, %k, %v : tensor<3x4x2048xf32>, "
         "tensor<3x5x2048xf32>, tensor<3x5x8xf32> -> tensor<3x4x8xf32>",
         "tensor<3x4x8xf32>"));
  EXPECT_EQ(wide.gridX, 12);
  EXPECT_EQ(wide.blockX, 128);
  EXPECT_EQ(wide.sharedBytes, (5 + 2048) * 4);
}

// With a valid length the kernels take it as one more (i64) operand, read
// it on the device (a CUDA graph replays any length), clamp it, and skip
// the tiles past it: a query tile past the valid rows reads no key, a key
// tile past the valid keys sees no query. Every kernel family: CUDA cores,
// tensor cores (bf16, D = 16) and the wide-head fallbacks.
TEST(NNKernels, AttentionWithAValidLengthSkipsPaddedTiles) {
  for (const char *t : {"f32", "bf16"}) {
    SCOPED_TRACE(t);
    std::string text = R"(
func.func @f(%q: Q, %l: tensor<i64>) -> (Q, Q) {
  %o = step.attention %q, %q, %q valid %l causal : Q, Q, Q, tensor<i64> -> Q
  %r:3 = step.attention_grad %q, %q, %q, %q valid %l : Q, Q, Q, Q, tensor<i64> -> Q, Q, Q
  return %o, %r#1 : Q, Q
}
)";
    for (size_t at; (at = text.find('Q')) != std::string::npos;)
      text.replace(at, 1, std::string("tensor<2x70x16x") + t + ">");
    Parsed p = parse(text);
    ASSERT_TRUE(p.module);
    auto it = p.func().getBody().front().begin();
    auto fwd = emitKernel(&*it, "af"), grad = emitKernel(&*std::next(it), "ag");
    ASSERT_TRUE(fwd && grad);
    EXPECT_EQ(fwd->params, (Params{"in0", "in1", "in2", "in3", "out0"}));
    EXPECT_EQ(grad->params, (Params{"in0", "in1", "in2", "in3", "in4", "out0",
                                    "out1", "out2"}));
    EXPECT_TRUE(contains(fwd->source, "const long long *__restrict__ in3"));
    EXPECT_TRUE(
        contains(fwd->source, "const long long l_ = in3[0] < 0 ? 0 : in3[0];"));
    EXPECT_TRUE(contains(fwd->source, "lq_ = (int)(l_ < 70 ? l_ : 70)"));
    EXPECT_TRUE(contains(fwd->source, "i0 >= lq_ ? 0 :"));
    EXPECT_TRUE(contains(grad->source,
                         "const long long l_ = in4[0] < 0 ? 0 : in4[0];"));
    EXPECT_TRUE(contains(grad->source, "i0 >= lq_ ? 0 :"));
    EXPECT_TRUE(
        contains(grad->source, "const int iEnd = j0 >= lk_ ? 0 : lq_;"));
    EXPECT_EQ(contains(fwd->source, "af_abt<1>(s, qa, Kh, 24);"),
              std::string(t) == "bf16");
  }
  // Heads too wide for tiles: a padded row writes zeros and does no work;
  // a padded key sees no query.
  Parsed wide = parse(R"(
func.func @f(%q: tensor<3x4x2048xf32>, %l: tensor<i64>) -> (tensor<3x4x2048xf32>, tensor<3x4x2048xf32>) {
  %o = step.attention %q, %q, %q valid %l : tensor<3x4x2048xf32>, tensor<3x4x2048xf32>, tensor<3x4x2048xf32>, tensor<i64> -> tensor<3x4x2048xf32>
  %r:3 = step.attention_grad %q, %q, %q, %q valid %l causal : tensor<3x4x2048xf32>, tensor<3x4x2048xf32>, tensor<3x4x2048xf32>, tensor<3x4x2048xf32>, tensor<i64> -> tensor<3x4x2048xf32>, tensor<3x4x2048xf32>, tensor<3x4x2048xf32>
  return %o, %r#0 : tensor<3x4x2048xf32>, tensor<3x4x2048xf32>
}
)");
  ASSERT_TRUE(wide.module);
  auto it = wide.func().getBody().front().begin();
  auto fwd = emitKernel(&*it, "wf"), grad = emitKernel(&*std::next(it), "wg");
  ASSERT_TRUE(fwd && grad);
  EXPECT_EQ(fwd->blockX, 128); // a block per query row
  EXPECT_TRUE(
      contains(fwd->source, "if (i >= lq_) { // a padded row: 0, no work"));
  EXPECT_TRUE(grad->then.empty()); // a block per slice
  EXPECT_TRUE(contains(grad->source, "const int iEnd = j >= lk_ ? 0 : lq_;"));
}

// attention_lse stores each row's log-sum-exp (out1, f32); an
// attention_grad with the saved result and log-sum-exp reads them (in5,
// in6 after the valid length) instead of its pass over the key tiles, on
// CUDA cores and tensor cores alike; launch 2 is unchanged.
TEST(NNKernels, AttentionStatisticsSavedByTheForward) {
  for (const char *t : {"f32", "bf16"}) {
    SCOPED_TRACE(t);
    std::string text = R"(
func.func @f(%q: Q, %l: tensor<i64>) -> (Q, tensor<2x70xf32>, Q) {
  %o, %lse = step.attention_lse %q, %q, %q valid %l causal : Q, Q, Q, tensor<i64> -> Q, tensor<2x70xf32>
  %r:3 = step.attention_grad %q, %q, %q, %o valid %l saved(%o, %lse : Q, tensor<2x70xf32>) causal : Q, Q, Q, Q, tensor<i64> -> Q, Q, Q
  %s:3 = step.attention_grad %q, %q, %q, %o valid %l causal : Q, Q, Q, Q, tensor<i64> -> Q, Q, Q
  return %o, %lse, %r#0 : Q, tensor<2x70xf32>, Q
}
)";
    for (size_t at; (at = text.find('Q')) != std::string::npos;)
      text.replace(at, 1, std::string("tensor<2x70x16x") + t + ">");
    Parsed p = parse(text);
    ASSERT_TRUE(p.module);
    auto it = p.func().getBody().front().begin();
    auto fwd = emitKernel(&*it, "al");
    auto grad = emitKernel(&*std::next(it), "ag");
    auto plain = emitKernel(&*std::next(it, 2), "ap");
    ASSERT_TRUE(fwd && grad && plain);
    EXPECT_EQ(fwd->params,
              (Params{"in0", "in1", "in2", "in3", "out0", "out1"}));
    EXPECT_TRUE(contains(fwd->source, "float *__restrict__ out1"));
    // The log-sum-exp: natural (CUDA cores) or in the log2 domain, times
    // ln 2 (the register-level kernel, whose exponents are base 2).
    EXPECT_TRUE(contains(fwd->source, "logf(l") ||
                contains(fwd->source, "log2f(l"));
    EXPECT_EQ(grad->params, (Params{"in0", "in1", "in2", "in3", "in4", "in5",
                                    "in6", "out0", "out1", "out2"}));
    EXPECT_TRUE(contains(grad->source, "const float *__restrict__ in6"));
    bool bf16 = std::string(t) == "bf16";
    // f32: the CUDA-core kernels; bf16: mma.sync with the tiles in
    // registers (the recomputing gradient stays on wmma).
    EXPECT_TRUE(contains(grad->source,
                         bf16 ? "const float e0 = r0 < lq_ ? in6[b * 70 + r0] "
                                ": 0.0f;"
                              : "const float lse = i < lq_ ? in6[b * 70 + i] "
                                ": 0.0f;"));
    EXPECT_FALSE(contains(grad->source, "maxNaN(m")); // no online statistics
    EXPECT_TRUE(contains(plain->source, "maxNaN(m"));
    EXPECT_EQ(contains(plain->source, "wmma::mma_sync"), bf16);
    ASSERT_EQ(grad->then.size(), 1u);
    if (!bf16)
      continue;
    EXPECT_TRUE(
        contains(grad->source, "ag_ab<2>(dq, s, Kh, 24); // dq += dS K"));
    EXPECT_TRUE(
        contains(grad->source, "ag_ab<2>(dv, s, Gh, 24);  // dv += P^T G"));
    EXPECT_TRUE(contains(grad->source, "void __launch_bounds__(128) ag_dkdv("));
    EXPECT_EQ(grad->blockX, 128);
    EXPECT_EQ(grad->then[0].blockX, 128);
    EXPECT_EQ(grad->gridX, 2 * 2);
    EXPECT_EQ(grad->then[0].gridX, 2 * 2);
    // Q, G staged (rows of 24) and two K, V tiles; then K, V and two Q, G
    // tiles with the 64 queries' two statistics.
    EXPECT_EQ(grad->sharedBytes, 6 * 64 * 24 * 2);
    EXPECT_EQ(grad->then[0].sharedBytes, 6 * 64 * 24 * 2 + 2 * 2 * 64 * 4);
  }
}

TEST(NNKernels, AttentionGradWithSavedDsStoresDsForADqLaunch) {
  // step.saved_ds (stepc --attention-saved-ds): statistics, dk/dv storing
  // each visible dS^T tile (causal, 70 rows: 2 query tiles see 1 + 2 key
  // tiles, 3 tiles a slice), then dq from the stored tiles.
  Parsed p = parse(R"(
func.func @f(%q: tensor<2x70x16xbf16>, %o: tensor<2x70x16xbf16>, %lse: tensor<2x70xf32>) -> tensor<2x70x16xbf16> {
  %r:3 = step.attention_grad %q, %q, %q, %o saved(%o, %lse : tensor<2x70x16xbf16>, tensor<2x70xf32>) causal {step.saved_ds} : tensor<2x70x16xbf16>, tensor<2x70x16xbf16>, tensor<2x70x16xbf16>, tensor<2x70x16xbf16> -> tensor<2x70x16xbf16>, tensor<2x70x16xbf16>, tensor<2x70x16xbf16>
  return %r#0 : tensor<2x70x16xbf16>
}
)");
  ASSERT_TRUE(p.module);
  auto ks = emitKernel(&p.func().getBody().front().front(), "sd");
  ASSERT_TRUE(ks);
  ASSERT_EQ(ks->then.size(), 2u);
  EXPECT_EQ(ks->then[0].suffix, "_dkdv");
  EXPECT_EQ(ks->then[1].suffix, "_dq");
  EXPECT_EQ(ks->gridX, (2 * 70 + 31) / 32); // 32 rows a block
  EXPECT_EQ(ks->sharedBytes, 0);
  EXPECT_EQ(ks->then[1].gridX, 2 * 2);
  // Two K tiles (rows of 16 + 8) and two dS tiles (rows of 64 + 8).
  EXPECT_EQ(ks->then[1].sharedBytes, 2 * 64 * 24 * 2 + 2 * 64 * 72 * 2);
  EXPECT_TRUE(contains(ks->source, "__device__ uint4 sd_ds[3072];"));
  EXPECT_TRUE(contains(ks->source,
                       "(true ? (it) * ((it) + 1) / 2 + (jt) : (it) * 2 + "
                       "(jt))"));
  // The dk/dv launch stores dS^T between its two products; launch 1 only
  // the statistics (no dq product), launch 3 dq.
  size_t dv = ks->source.find("sd_ab<2>(dv, s, Gh, 24);");
  size_t store = ks->source.find("*reinterpret_cast<unsigned *>(ds_ + nt * 8)");
  size_t dk = ks->source.find("sd_ab<2>(dk, dp, Qh, 24);");
  ASSERT_NE(store, std::string::npos);
  EXPECT_LT(dv, store);
  EXPECT_LT(store, dk);
  EXPECT_FALSE(contains(ks->source, "sd_ab<2>(dq, s, Kh"));
  EXPECT_TRUE(contains(ks->source, "void __launch_bounds__(128) sd_dq("));
  EXPECT_TRUE(contains(ks->source, "sd_dsk<2>(dq, Dh, Kh, 24);"));
  expectCubinsForSm80AndSm90(*ks);
}

TEST(NNKernels, AttentionGradWithAtomicDqAddsIntoAnAccumulator) {
  // step.atomic_dq (stepc --attention-atomic-dq), before step.saved_ds
  // when both are set: statistics and the accumulator zeroed, dk/dv
  // staging each dS^T tile in shared memory and adding dS K into the
  // accumulator, then dq rounded from it; no dS in global memory.
  Parsed p = parse(R"(
func.func @f(%q: tensor<2x70x16xbf16>, %o: tensor<2x70x16xbf16>, %lse: tensor<2x70xf32>) -> tensor<2x70x16xbf16> {
  %r:3 = step.attention_grad %q, %q, %q, %o saved(%o, %lse : tensor<2x70x16xbf16>, tensor<2x70xf32>) causal {step.atomic_dq, step.saved_ds} : tensor<2x70x16xbf16>, tensor<2x70x16xbf16>, tensor<2x70x16xbf16>, tensor<2x70x16xbf16> -> tensor<2x70x16xbf16>, tensor<2x70x16xbf16>, tensor<2x70x16xbf16>
  return %r#0 : tensor<2x70x16xbf16>
}
)");
  ASSERT_TRUE(p.module);
  auto ks = emitKernel(&p.func().getBody().front().front(), "ad");
  ASSERT_TRUE(ks);
  ASSERT_EQ(ks->then.size(), 2u);
  EXPECT_EQ(ks->then[0].suffix, "_dkdv");
  EXPECT_EQ(ks->then[1].suffix, "_dq");
  EXPECT_EQ(ks->gridX, (2 * 70 + 31) / 32); // 32 rows a block
  EXPECT_EQ(ks->sharedBytes, 0);
  // K, V and two Q, G tiles (rows of 16 + 8), the statistics, one dS^T
  // tile (rows of 64 + 8).
  EXPECT_EQ(ks->then[0].sharedBytes,
            6 * 64 * 24 * 2 + 2 * 2 * 64 * 4 + 64 * 72 * 2);
  // dq rounded from the accumulator: 2 x 70 rows of 8 pairs, 128 a block.
  EXPECT_EQ(ks->then[1].gridX, (2 * 70 * 8 + 127) / 128);
  EXPECT_EQ(ks->then[1].blockX, 128);
  EXPECT_EQ(ks->then[1].sharedBytes, 0);
  // 16-byte aligned: launch 1 zeroes it four floats at a time.
  EXPECT_TRUE(
      contains(ks->source, "__device__ __align__(16) float ad_dqacc[2240];"));
  EXPECT_FALSE(contains(ks->source, "ad_ds["));
  // Launch 1 zeroes the accumulator; launch 2 stages dS^T after dv's
  // product, then dk's product, a barrier, dq's and the atomics.
  size_t zero = ks->source.find("make_uint4(0u, 0u, 0u, 0u); // four 0.0f");
  size_t dkdv = ks->source.find("ad_dkdv(");
  size_t dv = ks->source.find("ad_ab<2>(dv, s, Gh, 24);");
  size_t store = ks->source.find("Ds + (warp * 16 + g) * 72 + 2 * t4;");
  size_t dk = ks->source.find("ad_ab<2>(dk, dp, Qh, 24);");
  size_t bar = ks->source.find("__syncthreads(); // every warp's dS^T staged");
  size_t dq = ks->source.find("ad_dsk<2>(dq, Ds, Kh, 24);");
  size_t atomic = ks->source.find("atomicAdd(acc0 + n * 8, dq[n][0]);");
  ASSERT_NE(zero, std::string::npos);
  ASSERT_NE(atomic, std::string::npos);
  EXPECT_LT(zero, dkdv);
  EXPECT_LT(dkdv, dv);
  EXPECT_LT(dv, store);
  EXPECT_LT(store, dk);
  EXPECT_LT(dk, bar);
  EXPECT_LT(bar, dq);
  EXPECT_LT(dq, atomic);
  // Every add into the accumulator is atomic (blocks of other key tiles
  // add into the same rows): both rows' two columns, none by a plain +=.
  for (const char *add : {"atomicAdd(acc0 + n * 8, dq[n][0]);",
                          "atomicAdd(acc0 + n * 8 + 1, dq[n][1]);",
                          "atomicAdd(acc0 + 8 * 16 + n * 8, dq[n][2]);",
                          "atomicAdd(acc0 + 8 * 16 + n * 8 + 1, dq[n][3]);"})
    EXPECT_TRUE(contains(ks->source, add)) << add;
  EXPECT_FALSE(contains(ks->source, "] += dq[n]"));
  EXPECT_FALSE(contains(ks->source, "ad_ab<2>(dq, s, Kh"));
  EXPECT_TRUE(contains(ks->source, "void __launch_bounds__(128) ad_dq("));
  expectCubinsForSm80AndSm90(*ks);
}

TEST(NNKernels, AttentionGradIsTwoLaunchesWithoutScores) {
  auto ks = attentionGrad("tensor<2x4x16x8xf32>", "tensor<2x4x24x8xf32>",
                          "tensor<2x4x24x12xf32>", "tensor<2x4x16x12xf32>",
                          "causal", "ag");
  ASSERT_TRUE(ks);
  EXPECT_EQ(ks->params,
            (Params{"in0", "in1", "in2", "in3", "out0", "out1", "out2"}));
  // Statistics and dq: a block per (slice, query tile); staged Q, G, K, V
  // (rows padded to 9, 13, 9, 13 floats), dS (64 x 65), two statistics
  // per row.
  EXPECT_EQ(ks->gridX, 8);
  EXPECT_EQ(ks->blockX, 256);
  int64_t staged = 64 * (9 + 13 + 9 + 13);
  EXPECT_EQ(ks->sharedBytes, 4 * (staged + 64 * 65 + 2 * 64));
  // Then dk and dv: a block per (slice, key tile), P and dS tiles.
  ASSERT_EQ(ks->then.size(), 1u);
  EXPECT_EQ(ks->then[0].suffix, "_dkdv");
  EXPECT_EQ(ks->then[0].gridX, 8);
  EXPECT_EQ(ks->then[0].blockX, 256);
  EXPECT_EQ(ks->then[0].sharedBytes, 4 * (staged + 2 * 64 * 65 + 2 * 64));
  EXPECT_TRUE(contains(ks->source, "void __launch_bounds__(256) ag_dkdv("));
  EXPECT_TRUE(contains(ks->source, "__device__ float ag_stats[256];"));
  EXPECT_TRUE(contains(ks->source, "0.353553385f")); // 1 / sqrt(8)
  EXPECT_TRUE(contains(ks->source, "true ? min(lk_, i0 + 64) : lk_"));
  EXPECT_TRUE(contains(ks->source, "float accq[4][1];"));
  EXPECT_TRUE(contains(ks->source, "float acck[4][1], accv[4][1];"));
  EXPECT_FALSE(contains(ks->source, "atomic"));
  // An empty query still writes dk and dv (zeros): the second launch runs
  // over the key tiles of every slice.
  ks = attentionGrad("tensor<3x0x8xf32>", "tensor<3x5x8xf32>",
                     "tensor<3x5x4xf32>", "tensor<3x0x4xf32>", "", "ag0");
  ASSERT_TRUE(ks);
  EXPECT_EQ(ks->gridX, 1);
  ASSERT_EQ(ks->then.size(), 1u);
  EXPECT_EQ(ks->then[0].gridX, 3);
  EXPECT_TRUE(contains(ks->source, "w < (long long)3 * 1;"));
  EXPECT_TRUE(contains(ks->source, "__device__ float ag0_stats[1];"));
  // A head too wide for 16-row tiles: the one-block-per-slice kernel.
  ks = attentionGrad("tensor<3x4x1024xf32>", "tensor<3x5x1024xf32>",
                     "tensor<3x5x1024xf32>", "tensor<3x4x1024xf32>", "", "agw");
  ASSERT_TRUE(ks);
  EXPECT_TRUE(ks->then.empty());
  EXPECT_EQ(ks->gridX, 3); // one block per slice
  EXPECT_TRUE(contains(ks->source, "b < 3;"));
}

TEST(NNKernels, Bf16AttentionRunsOnTensorCores) {
  // Widths that are multiples of 16, at most 128: mma.sync with the
  // scores in registers, 4 warps of 16 query rows; the shared memory holds
  // only the bf16 Q tile and two K and V tiles (the next one loading while
  // this one is used; rows padded to 72); the heaviest causal tiles first.
  KernelSource ks = firstKernel(
      fn("%q: tensor<2x3x100x64xbf16>, %k: tensor<2x3x100x64xbf16>, "
         "%v: tensor<2x3x100x64xbf16>",
         "step.attention %q, %k, %v causal : tensor<2x3x100x64xbf16>, "
         "tensor<2x3x100x64xbf16>, tensor<2x3x100x64xbf16> -> "
         "tensor<2x3x100x64xbf16>",
         "tensor<2x3x100x64xbf16>"));
  EXPECT_TRUE(contains(ks.source, "mma.sync.aligned.m16n8k16.row.col.f32.\" "
                                  "ty \".\" ty \".f32"));
  EXPECT_TRUE(contains(ks.source, "STEP_MMA_FN(stepMmaBf16, \"bf16\")"));
  EXPECT_TRUE(contains(ks.source, "_ab<8>(o, s, Vh, 72); // O += P V"));
  EXPECT_TRUE(contains(ks.source, "cp.async.cg.shared.global"));
  // Fragments by ldmatrix (V read down its columns: the transposing
  // form), the whole tiles unmasked.
  EXPECT_TRUE(contains(ks.source, "ldmatrix.sync.aligned.m8n8.x\" #n trans"));
  EXPECT_TRUE(contains(ks.source, "stepLdm4T(b, p + n * 8);"));
  EXPECT_TRUE(contains(ks.source, "stepLdm4(b, p + kk * 16);"));
  EXPECT_TRUE(contains(ks.source, "if (!k_WHOLE(i0, j0))\n"
                                  "        k_mask(s, r0, j0, lq_, lk_, "));
  // Unscaled scores: the scale in each exponent's fmaf.
  EXPECT_TRUE(contains(ks.source, "stepExp2(fmaf(s[nt][e], "));
  EXPECT_FALSE(contains(ks.source, "ld.shared")); // no per-register loads
  EXPECT_FALSE(contains(ks.source, "wmma"));
  EXPECT_TRUE(
      contains(ks.source, "const int i0 = (2 - 1 - (int)(w / 6)) * 64;"));
  EXPECT_EQ(ks.gridX, 6 * 2); // two 64-row query tiles per slice
  EXPECT_EQ(ks.blockX, 128);
  EXPECT_EQ(ks.sharedBytes, 5 * 64 * 72 * 2);
  EXPECT_TRUE(ks.then.empty());
  // f16 takes the f16 instruction.
  KernelSource h = firstKernel(
      fn("%q: tensor<2x40x32xf16>",
         "step.attention %q, %q, %q : tensor<2x40x32xf16>, "
         "tensor<2x40x32xf16>, tensor<2x40x32xf16> -> tensor<2x40x32xf16>",
         "tensor<2x40x32xf16>"));
  EXPECT_TRUE(contains(h.source, "stepMmaF16(acc[nt]"));
  EXPECT_TRUE(contains(h.source, "__half_as_ushort(__float2half_rn(lo))"));
  // A head wider than 128: wmma tile products through shared memory: bf16
  // Q, K, V (rows padded to 152), P (72), f32 scores and the f32 output
  // (rows of 148).
  KernelSource wide = firstKernel(
      fn("%q: tensor<2x100x144xbf16>",
         "step.attention %q, %q, %q causal : tensor<2x100x144xbf16>, "
         "tensor<2x100x144xbf16>, tensor<2x100x144xbf16> -> "
         "tensor<2x100x144xbf16>",
         "tensor<2x100x144xbf16>"));
  EXPECT_TRUE(contains(wide.source, "#include <mma.h>"));
  EXPECT_TRUE(contains(wide.source, "wmma::mma_sync"));
  EXPECT_EQ(wide.blockX, 256);
  EXPECT_EQ(wide.sharedBytes,
            3 * 64 * 152 * 2 + 64 * 72 * 2 + 2 * 64 * 148 * 4);
  EXPECT_TRUE(ks.then.empty());
  // Its gradient: two launches, both on tensor cores.
  auto g = attentionGrad("tensor<6x100x64xbf16>", "tensor<6x100x64xbf16>",
                         "tensor<6x100x32xbf16>", "tensor<6x100x32xbf16>",
                         "causal", "tg");
  ASSERT_TRUE(g);
  EXPECT_TRUE(contains(g->source, "wmma::mma_sync"));
  EXPECT_TRUE(contains(g->source, "void __launch_bounds__(256) tg_dkdv("));
  EXPECT_TRUE(contains(g->source, "__device__ float tg_stats[1200];"));
  ASSERT_EQ(g->then.size(), 1u);
  EXPECT_EQ(g->gridX, 12);
  EXPECT_EQ(g->then[0].gridX, 12);
  // Q, K (72), V, G (40), P, dS (72) in bf16; S, dP (68) in f32; the rows'
  // statistics.
  int64_t bytes = 2 * 64 * 72 * 2 + 2 * 64 * 40 * 2 + 2 * 64 * 72 * 2 +
                  2 * 64 * 68 * 4 + 2 * 64 * 4;
  EXPECT_EQ(g->sharedBytes, bytes);
  EXPECT_EQ(g->then[0].sharedBytes, bytes);
  // A width that is not a multiple of 16 stays on CUDA cores.
  KernelSource odd = firstKernel(
      fn("%q: tensor<2x8x24xbf16>, %k: tensor<2x8x24xbf16>, "
         "%v: tensor<2x8x24xbf16>",
         "step.attention %q, %k, %v : tensor<2x8x24xbf16>, "
         "tensor<2x8x24xbf16>, tensor<2x8x24xbf16> -> tensor<2x8x24xbf16>",
         "tensor<2x8x24xbf16>"));
  EXPECT_FALSE(contains(odd.source, "wmma"));
}

} // namespace
