//===- Model.cpp - A GPT-2-style decoder traced with the C++ API ----------===//
//
// Each function below is one nn.Module of nanoGPT's model.py, written with
// the tracing API; names of params follow GPT-2's checkpoints. The only op
// built outside the API is the tied LM head's matmul with transpose_b
// (matmulTransposeB). Packed rows (GPT2Config::packed) replace
// step.attention by its masked form written out (maskedAttention).
//
//===----------------------------------------------------------------------===//

#include "examples/gpt2/Model.h"

#include "dialects/step/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
#include <optional>
#include <stdexcept>

using namespace step::trace;

namespace gpt2 {

std::string GPT2Config::check() const {
  for (auto [name, v] : {std::pair<const char *, int64_t>{"vocab", vocab},
                         {"context", context},
                         {"layers", layers},
                         {"heads", heads},
                         {"width", width},
                         {"batch", batch}})
    if (v <= 0)
      return std::string(name) + " must be positive, got " +
             std::to_string(v);
  if (width % heads != 0)
    return "width (" + std::to_string(width) +
           ") must be a multiple of heads (" + std::to_string(heads) + ")";
  if (packed && dynamicContext)
    return "packed rows and a dynamic context exclude each other (packed "
           "rows have the fixed length context, nothing is padded)";
  return "";
}

int64_t GPT2Config::seqDim() const {
  return dynamicContext ? dyn("T", context) : context;
}

Tensor matmulTransposeB(Graph &g, const Tensor &x, const Tensor &w,
                        SourceLoc loc) {
  auto at = [&] {
    return " (at " + std::string(loc.file ? loc.file : "?") + ":" +
           std::to_string(loc.line) + ")";
  };
  if (!x || !w)
    throw std::invalid_argument("matmulTransposeB: null tensor" + at());
  if (g.finished())
    throw std::logic_error("matmulTransposeB: the graph is finished" + at());
  mlir::Block &body = g.forward().getBody().front();
  for (const Tensor *v : {&x, &w})
    if (v->value().getParentBlock() != &body)
      throw std::invalid_argument(
          "matmulTransposeB: tensor of another graph" + at());
  if (x.dtype() != w.dtype() ||
      !(x.dtype() == DType::F32 || x.dtype() == DType::F16 ||
        x.dtype() == DType::BF16))
    throw DTypeError("matmulTransposeB: needs two float tensors of one "
                     "dtype" + at());
  if (x.rank() < 2 || w.rank() != 2 || x.dim(-1) != w.dim(1))
    throw ShapeError("matmulTransposeB: needs x [..., K] and w [N, K]" +
                     at());

  mlir::MLIRContext *ctx = g.context();
  mlir::Location where = mlir::NameLoc::get(
      mlir::StringAttr::get(ctx, "matmul"),
      mlir::FileLineColLoc::get(ctx, loc.file ? loc.file : "?", loc.line, 0));
  auto xType = mlir::cast<mlir::RankedTensorType>(x.value().getType());
  llvm::SmallVector<int64_t> shape(xType.getShape());
  shape.back() = w.dim(0);
  auto type = mlir::RankedTensorType::get(shape, xType.getElementType());

  mlir::OpBuilder b = mlir::OpBuilder::atBlockEnd(&body);
  auto op = b.create<mlir::step::MatmulOp>(where, type, x.value(), w.value(),
                                           /*transpose_a=*/false,
                                           /*transpose_b=*/true);
  std::string message;
  bool ok;
  {
    mlir::ScopedDiagnosticHandler capture(ctx, [&](mlir::Diagnostic &d) {
      if (message.empty())
        message = d.str();
      return mlir::success();
    });
    ok = mlir::succeeded(mlir::verify(op));
  }
  if (!ok) {
    op->erase();
    throw ShapeError("matmulTransposeB: " + message + at());
  }
  return Tensor(x.state(), op.getResult());
}

namespace {

/// GPT-2's Conv1D: y = x @ w + b with w [in, out], init N(0, std), b = 0.
Tensor conv1d(Graph &g, const std::string &name, const Tensor &x, int64_t in,
              int64_t out, double std) {
  Tensor w = g.param(name + ".weight", {in, out}, init::normal(0, std));
  Tensor b = g.param(name + ".bias", {out}, init::zeros());
  return linear(x, w, b);
}

/// nn.LayerNorm(C) with GPT-2's eps (1e-5): weight ones, bias zeros.
Tensor layerNorm(Graph &g, const std::string &name, const Tensor &x,
                 int64_t width) {
  Tensor w = g.param(name + ".weight", {width}, init::ones());
  Tensor b = g.param(name + ".bias", {width}, init::zeros());
  return layer_norm(x, w, b, 1e-5);
}

/// [B, T, C] -> [B, H, T, D]: one head per slice of D = C / H channels.
Tensor splitHeads(const Tensor &x, const GPT2Config &cfg) {
  int64_t d = cfg.width / cfg.heads;
  return transpose(reshape(x, {cfg.batch, cfg.seqDim(), cfg.heads, d}), 1, 2);
}

/// Block-diagonal causal attention of packed rows: softmax(q k^T / sqrt(D))
/// v with the scores of keys that `visible` ([B, 1, T, T] i1) hides set to
/// -inf, so they get probability exactly 0 (as keys past a causal mask do in
/// step.attention). step.attention has no mask operand, so the scores are
/// spelled out with matmul, where and softmax.
///
/// Cost: the [B, H, T, T] scores and probabilities are materialized (and the
/// probabilities kept for the backward pass): B*H*T^2 floats per layer,
/// where step.attention needs none of them on a GPU. At the example's tiny
/// config (B = 8, H = 2, T = 32) that is 16 K floats per layer; at GPT-2's
/// T = 1024, H = 12 it is 12.6 M floats (50 MB in f32) per row and layer. Packing pays this to fill
/// every row with real tokens; padding (docs/dynamic-shapes.md) keeps the
/// fused op.
Tensor maskedAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor &visible) {
  double scale = 1.0 / std::sqrt(static_cast<double>(q.dim(-1)));
  Tensor scores = matmul(q, transpose(k, 2, 3)) * scale; // [B, H, T, T]
  scores = where(visible, scores, -INFINITY);
  // Key j = i is always visible (a token is in its own segment), so no row
  // is all -inf and the softmax stays finite.
  return matmul(softmax(scores, -1), v);
}

/// CausalSelfAttention: one fused c_attn for q, k, v (columns [0, C),
/// [C, 2C), [2C, 3C) of its [C, 3C] weight, as GPT-2 splits them), causal
/// scaled dot-product attention per head, heads merged back, c_proj. With a
/// symbolic T the columns of the weight are sliced instead of those of the
/// [B, T, 3C] product (step.slice needs static limits on every dim): the
/// same products, three matmuls instead of one. `visible` is null, or the
/// packed rows' block-diagonal mask (maskedAttention).
Tensor attention(Graph &g, const std::string &name, const Tensor &x,
                 const GPT2Config &cfg, double projStd,
                 const Tensor &visible) {
  int64_t c = cfg.width;
  Tensor q, k, v;
  if (cfg.dynamicContext) {
    Tensor w = g.param(name + ".c_attn.weight", {c, 3 * c},
                       init::normal(0, 0.02));
    Tensor b = g.param(name + ".c_attn.bias", {3 * c}, init::zeros());
    // One traced op per statement: the order of a call's arguments is
    // unspecified in C++, and the traced graph must not depend on the
    // compiler that built this program.
    auto part = [&](int64_t i) {
      Tensor bias = slice(b, 0, i * c, (i + 1) * c);
      Tensor weight = slice(w, 1, i * c, (i + 1) * c);
      return splitHeads(linear(x, weight, bias), cfg);
    };
    q = part(0), k = part(1), v = part(2);
  } else {
    Tensor qkv = conv1d(g, name + ".c_attn", x, c, 3 * c, 0.02);
    q = splitHeads(slice(qkv, 2, 0, c), cfg);
    k = splitHeads(slice(qkv, 2, c, 2 * c), cfg);
    v = splitHeads(slice(qkv, 2, 2 * c, 3 * c), cfg);
  }
  Tensor y = visible ? maskedAttention(q, k, v, visible)
                     : scaled_dot_product_attention(q, k, v, /*causal=*/true);
  y = reshape(transpose(y, 1, 2), {cfg.batch, cfg.seqDim(), c});
  return conv1d(g, name + ".c_proj", y, c, c, projStd);
}

/// MLP: C -> 4C, GELU (tanh approximation, as GPT-2), 4C -> C.
Tensor mlp(Graph &g, const std::string &name, const Tensor &x,
           const GPT2Config &cfg, double projStd) {
  int64_t c = cfg.width;
  Tensor h = gelu(conv1d(g, name + ".c_fc", x, c, 4 * c, 0.02),
                  GeluApprox::Tanh);
  return conv1d(g, name + ".c_proj", h, 4 * c, c, projStd);
}

/// A pre-LN transformer block; `visible` as for attention().
Tensor block(Graph &g, int64_t i, const Tensor &x, const GPT2Config &cfg,
             const Tensor &visible) {
  std::string name = "h." + std::to_string(i);
  // nanoGPT scales the init of the residual projections by 1/sqrt(2 L):
  // each block adds two of them to the residual stream.
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  Tensor h = x + attention(g, name + ".attn",
                           layerNorm(g, name + ".ln_1", x, cfg.width), cfg,
                           projStd, visible);
  return h + mlp(g, name + ".mlp", layerNorm(g, name + ".ln_2", h, cfg.width),
                 cfg, projStd);
}

/// The [B, 1, T, T] i1 mask of packed rows: key j is visible to query i iff
/// j <= i and both are in one segment. Built once, shared by every layer
/// and head.
Tensor blockDiagonalCausal(Graph &g, const GPT2Config &cfg,
                           const Tensor &segments) {
  int64_t b = cfg.batch, t = cfg.context;
  Tensor columns = reshape(segments, {b, 1, t});
  Tensor same = eq(reshape(segments, {b, t, 1}), columns);
  Tensor keys = g.iota({t, t}, 1);
  Tensor causal = ge(g.iota({t, t}, 0), keys); // i >= j
  return reshape(where(causal, same, false), {b, 1, t, t});
}

/// Checks that `packed` matches `cfg.packed` and its tensors are [B, T] i64.
void checkPackedInputs(const GPT2Config &cfg, const PackedInputs &packed) {
  bool given = packed.positions || packed.segments;
  if (!cfg.packed) {
    if (given)
      throw std::invalid_argument(
          "gpt2: positions/segments given to a model without packed rows");
    return;
  }
  for (auto [name, t] : {std::pair<const char *, const Tensor *>{
                             "positions", &packed.positions},
                         {"segments", &packed.segments}}) {
    if (!*t)
      throw std::invalid_argument(std::string("gpt2: a packed model needs "
                                              "the ") + name + " input");
    if (t->shape() != Shape{cfg.batch, cfg.context} ||
        t->dtype() != DType::I64)
      throw ShapeError(std::string("gpt2: ") + name +
                       " must be [batch, context] = [" +
                       std::to_string(cfg.batch) + ", " +
                       std::to_string(cfg.context) + "] i64");
  }
}

} // namespace

Tensor gpt2Logits(Graph &g, const GPT2Config &cfg, const Tensor &tokens,
                  const PackedInputs &packed) {
  if (std::string err = cfg.check(); !err.empty())
    throw std::invalid_argument("gpt2: " + err);
  Shape want{cfg.batch, cfg.dynamicContext ? kDynamic : cfg.context};
  if (tokens.shape() != want)
    throw ShapeError("gpt2: tokens must be [batch, context] = [" +
                     std::to_string(cfg.batch) + ", " +
                     (cfg.dynamicContext ? "T" : std::to_string(cfg.context)) +
                     "]");
  checkPackedInputs(cfg, packed);
  Tensor wte = g.param("wte", {cfg.vocab, cfg.width}, init::normal(0, 0.02));
  Tensor wpe = g.param("wpe", {cfg.context, cfg.width}, init::normal(0, 0.02));
  Tensor tok = embedding(tokens, wte); // [B, T, C]
  Tensor x, visible;
  if (cfg.packed) {
    // Each token's position within its own segment: every document starts
    // at wpe row 0, as it would alone.
    x = tok + embedding(packed.positions, wpe); // [B, T, C]
    visible = blockDiagonalCausal(g, cfg, packed.segments);
  } else {
    Tensor pos = embedding(g.iota({cfg.seqDim()}, 0), wpe); // [T, C]
    x = tok + pos; // broadcast over the batch
  }
  for (int64_t i = 0; i < cfg.layers; ++i) {
    std::optional<Checkpoint> scope;
    if (cfg.checkpointBlocks)
      scope.emplace(g);
    x = block(g, i, x, cfg, visible);
  }
  x = layerNorm(g, "ln_f", x, cfg.width);
  return matmulTransposeB(g, x, wte); // [B, T, V], weights tied to wte
}

Tensor buildGPT2(Graph &g, const GPT2Config &cfg, Tensor tokens,
                 Tensor targets, const PackedInputs &packed) {
  Tensor logits = gpt2Logits(g, cfg, tokens, packed);
  Tensor flatTargets = reshape(targets, {-1});
  return cross_entropy(reshape(logits, {-1, cfg.vocab}), flatTargets,
                       Reduction::Mean, kIgnoreTarget);
}

} // namespace gpt2
