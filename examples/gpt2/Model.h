//===- Model.h - A GPT-2-style decoder traced with the C++ API --*- C++ -*-===//
//
// GPT-2 (Radford et al. 2019, as nanoGPT writes it) on the tracing API:
//
//   x = wte[tokens] + wpe[arange(T)]
//   for each of L blocks:
//     x = x + c_proj(attention(split_heads(c_attn(ln_1(x))), causal))
//     x = x + mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(x))))
//   logits = ln_f(x) @ wte^T                  (LM head tied to wte)
//   loss = cross_entropy(logits [B*T, V], targets [B*T])
//
// Params carry GPT-2's names (wte, wpe, h.<i>.ln_1.weight, h.<i>.attn.c_attn.
// weight, ..., ln_f.bias); linear weights are stored [in, out] (y = x @ w),
// the layout of GPT-2's Conv1D, so the files load into a PyTorch GPT-2 with
// the same transposes its checkpoints need.
//
// Packed rows (GPT2Config::packed, Packing.h): a row holds several documents
// back to back. Two more inputs say where they are: `positions` (the index
// of each token within its own segment) replaces arange(T) as the wpe index,
// and `segments` (a document id per token) turns the causal mask into a
// block-diagonal one: query i sees key j iff j <= i and segments[i] ==
// segments[j]. Each document then computes exactly what it would alone.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_EXAMPLES_GPT2_MODEL_H
#define STEP_EXAMPLES_GPT2_MODEL_H

#include "compiler/trace/Trace.h"

#include <cstdint>
#include <string>

namespace gpt2 {

/// The model's sizes; the defaults are the tiny configuration the example
/// trains on the reference interpreter.
struct GPT2Config {
  int64_t vocab = 256;  // V: byte-level tokens
  int64_t context = 32; // T: tokens per sequence (also the rows of wpe)
  int64_t layers = 2;   // L
  int64_t heads = 2;    // H; width must be a multiple of it
  int64_t width = 32;   // C
  int64_t batch = 8;    // B
  /// T symbolic (dyn("T", context)): sequences of any length up to
  /// `context`, padded to buckets by step-pad-dynamic (stepc --buckets).
  bool dynamicContext = false;
  /// Packed rows: the model takes `positions` and `segments` ([B, T] i64)
  /// besides tokens and attends block-diagonally (see the file comment).
  /// Not with dynamicContext: packing fills every row to T, nothing pads.
  bool packed = false;
  /// Each transformer block traced in a trace::Checkpoint scope, as
  /// `torch.utils.checkpoint` around nanoGPT's blocks: the backward
  /// recomputes a block's activations from its input (docs/remat.md).
  bool checkpointBlocks = false;

  /// T as the tracing API takes it: `context`, or the dyn() code.
  int64_t seqDim() const;

  /// Empty when the sizes make a model, else what is wrong.
  std::string check() const;
};

/// The target cross_entropy skips: its ignore_index (PyTorch's default,
/// -100). buildGPT2 passes it explicitly; the packing loader writes it at
/// the last token of every document and over filler.
inline constexpr int64_t kIgnoreTarget = -100;

/// The extra inputs of a packed model ([B, T] i64 each); both null for an
/// unpacked one.
struct PackedInputs {
  /// Index of each token within its segment, 0 at a segment's first token;
  /// selects the wpe row (so every entry must be < context).
  step::trace::Tensor positions;
  /// Segment id of each token within its row; tokens attend only to earlier
  /// tokens of the same segment.
  step::trace::Tensor segments;
};

/// Traces the logits [B, T, V] of `tokens` ([B, T] i64) into `g`, creating
/// every param with its GPT-2/nanoGPT initializer: N(0, 0.02) for weights
/// and both embeddings, N(0, 0.02 / sqrt(2 L)) for the two c_proj weights of
/// each block (residual projections), zeros for biases, ones/zeros for layer
/// norms. `packed` must hold both tensors iff `cfg.packed`. Throws
/// std::invalid_argument if `cfg.check()` fails or `packed` does not match
/// `cfg.packed`, ShapeError for inputs of the wrong shape or dtype.
step::trace::Tensor gpt2Logits(step::trace::Graph &g, const GPT2Config &cfg,
                               const step::trace::Tensor &tokens,
                               const PackedInputs &packed = {});

/// The mean next-token cross-entropy of gpt2Logits(g, cfg, tokens, packed)
/// against `targets` ([B, T] i64), over the B*T positions flattened;
/// positions whose target is kIgnoreTarget count neither in the sum nor in
/// the divisor.
step::trace::Tensor buildGPT2(step::trace::Graph &g, const GPT2Config &cfg,
                              step::trace::Tensor tokens,
                              step::trace::Tensor targets,
                              const PackedInputs &packed = {});

/// `x @ w^T` for x [..., K] and a rank-2 w [N, K] of `g`, as one
/// step.matmul with transpose_b: the tracing API's matmul has no transpose
/// flags, and matmul(x, t(w)) would add a transposed copy of the tied
/// [V, C] table. Checked with the op's verifier; throws ShapeError,
/// DTypeError or std::logic_error (finished graph) like the API's ops.
step::trace::Tensor matmulTransposeB(
    step::trace::Graph &g, const step::trace::Tensor &x,
    const step::trace::Tensor &w,
    step::trace::SourceLoc loc = step::trace::SourceLoc());

} // namespace gpt2

#endif // STEP_EXAMPLES_GPT2_MODEL_H
