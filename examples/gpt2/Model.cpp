//===- Model.cpp - A GPT-2-style decoder traced with the C++ API ----------===//
//
// Each function below is one nn.Module of nanoGPT's model.py, written with
// the tracing API; names of params follow GPT-2's checkpoints. The only op
// built outside the API is the tied LM head's matmul with transpose_b
// (matmulTransposeB).
//
//===----------------------------------------------------------------------===//

#include "examples/gpt2/Model.h"

#include "dialects/step/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
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

/// CausalSelfAttention: one fused c_attn for q, k, v (columns [0, C),
/// [C, 2C), [2C, 3C) of its [C, 3C] weight, as GPT-2 splits them), causal
/// scaled dot-product attention per head, heads merged back, c_proj. With a
/// symbolic T the columns of the weight are sliced instead of those of the
/// [B, T, 3C] product (step.slice needs static limits on every dim): the
/// same products, three matmuls instead of one.
Tensor attention(Graph &g, const std::string &name, const Tensor &x,
                 const GPT2Config &cfg, double projStd) {
  int64_t c = cfg.width;
  Tensor q, k, v;
  if (cfg.dynamicContext) {
    Tensor w = g.param(name + ".c_attn.weight", {c, 3 * c},
                       init::normal(0, 0.02));
    Tensor b = g.param(name + ".c_attn.bias", {3 * c}, init::zeros());
    auto part = [&](int64_t i) {
      return splitHeads(linear(x, slice(w, 1, i * c, (i + 1) * c),
                               slice(b, 0, i * c, (i + 1) * c)),
                        cfg);
    };
    q = part(0), k = part(1), v = part(2);
  } else {
    Tensor qkv = conv1d(g, name + ".c_attn", x, c, 3 * c, 0.02);
    q = splitHeads(slice(qkv, 2, 0, c), cfg);
    k = splitHeads(slice(qkv, 2, c, 2 * c), cfg);
    v = splitHeads(slice(qkv, 2, 2 * c, 3 * c), cfg);
  }
  Tensor y = scaled_dot_product_attention(q, k, v, /*causal=*/true);
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

/// A pre-LN transformer block.
Tensor block(Graph &g, int64_t i, const Tensor &x, const GPT2Config &cfg) {
  std::string name = "h." + std::to_string(i);
  // nanoGPT scales the init of the residual projections by 1/sqrt(2 L):
  // each block adds two of them to the residual stream.
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  Tensor h = x + attention(g, name + ".attn",
                           layerNorm(g, name + ".ln_1", x, cfg.width), cfg,
                           projStd);
  return h + mlp(g, name + ".mlp", layerNorm(g, name + ".ln_2", h, cfg.width),
                 cfg, projStd);
}

} // namespace

Tensor gpt2Logits(Graph &g, const GPT2Config &cfg, const Tensor &tokens) {
  if (std::string err = cfg.check(); !err.empty())
    throw std::invalid_argument("gpt2: " + err);
  Shape want{cfg.batch, cfg.dynamicContext ? kDynamic : cfg.context};
  if (tokens.shape() != want)
    throw ShapeError("gpt2: tokens must be [batch, context] = [" +
                     std::to_string(cfg.batch) + ", " +
                     (cfg.dynamicContext ? "T" : std::to_string(cfg.context)) +
                     "]");
  Tensor wte = g.param("wte", {cfg.vocab, cfg.width}, init::normal(0, 0.02));
  Tensor wpe = g.param("wpe", {cfg.context, cfg.width}, init::normal(0, 0.02));
  Tensor tok = embedding(tokens, wte);                   // [B, T, C]
  Tensor pos = embedding(g.iota({cfg.seqDim()}, 0), wpe); // [T, C]
  Tensor x = tok + pos; // broadcast over the batch
  for (int64_t i = 0; i < cfg.layers; ++i)
    x = block(g, i, x, cfg);
  x = layerNorm(g, "ln_f", x, cfg.width);
  return matmulTransposeB(g, x, wte); // [B, T, V], weights tied to wte
}

Tensor buildGPT2(Graph &g, const GPT2Config &cfg, Tensor tokens,
                 Tensor targets) {
  Tensor logits = gpt2Logits(g, cfg, tokens);
  return cross_entropy(reshape(logits, {-1, cfg.vocab}),
                       reshape(targets, {-1}));
}

} // namespace gpt2
