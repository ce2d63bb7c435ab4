//===- gpt2.cpp - Train a tiny GPT-2 on bytes of text (reference interp) --===//
//
//   gpt2-example [--vocab 256] [--context 32] [--layers 2] [--heads 2]
//                [--width 32] [--batch 8] [--text FILE] [--seed 0]
//                [--steps 200] [--lr 3e-3] [--warmup 20] [--min-lr-ratio 0.1]
//                [--wd 0] [--clip 1] [--print-every 10] [--sample 0]
//                [--out DIR] [--emit-model DIR] [--pack]
//                [--prepare DIR [--val-fraction 0.1]]
//                [--data DIR [--eval-every N [--eval-batches K]
//                 [--patience P [--min-delta D]]]]
//
// Traces GPT-2 (Model.h) for batches of B windows of T bytes of --text: the
// tokens are the bytes, the targets the same windows shifted by one.
//
// --pack: batches of whole documents instead (the paragraphs of the text,
// packed into rows by Packing.h), with the packed model (GPT2Config::packed:
// positions and segments inputs, block-diagonal causal attention).
//
// --emit-model DIR writes DIR/model.mlir, DIR/params/<name>.npy (initial
// params), one batch DIR/inputs/{tokens,targets}.npy ([B, T] i64; with
// --pack also positions.npy and segments.npy), prints
// `loss = <value>` of the forward pass on the reference interpreter, and
// exits (gpt2_parity.py checks it against PyTorch).
//
// Otherwise trains with step::jit (compiler/jit/Jit.h) through the runtime on the
// reference interpreter: AdamW, linear warmup then cosine decay to
// lr * min-lr-ratio, gradients clipped to --clip (0: off), a random window
// per batch row. Prints a line every --print-every steps and writes
// OUT/loss.csv and OUT/loss.svg; with --sample N it then generates N bytes
// from the trained model. Everything is a function of --seed.
//
// --prepare DIR writes the text's bytes as DIR/train.tok and DIR/val.tok
// (the last --val-fraction held out; docs/data.md) and exits. --data DIR
// then trains on random windows of train.tok, made ahead by a background
// prefetcher; --eval-every N evaluates the mean loss of --eval-batches
// fixed windows of val.tok with the model's forward compiled on its own,
// writing OUT/val.csv, and --patience P stops when it has not improved by
// more than --min-delta for P evaluations in a row (Data.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/jit/Jit.h"
#include "examples/common/LossPlot.h"
#include "examples/gpt2/Data.h"
#include "examples/gpt2/Model.h"
#include "examples/gpt2/Packing.h"
#include "runtime/Npy.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>

#ifndef GPT2_DEFAULT_TEXT
#define GPT2_DEFAULT_TEXT "examples/gpt2/data/tiny.txt"
#endif

using namespace step::trace;
namespace rt = step::rt;
namespace fs = std::filesystem;
using gpt2::GPT2Config;

namespace {

struct Options {
  GPT2Config cfg;
  std::string text = GPT2_DEFAULT_TEXT;
  uint64_t seed = 0;
  int64_t steps = 200, warmup = 20, printEvery = 10, sample = 0;
  double lr = 3e-3, minLrRatio = 0.1, wd = 0.0, clip = 1.0;
  std::string out = "gpt2-out", emitModel;
  std::string amp; ///< "", "bf16" or "fp16" (stepc --amp)
  bool pack = false; ///< cfg.packed, with the packing loader
  std::string prepare, data; ///< --prepare DIR, --data DIR
  double valFraction = 0.1, minDelta = 0;
  int64_t evalEvery = 0, evalBatches = 4, patience = 0;
};

/// The bytes of `path`, as token ids; each must be < vocab. Random windows
/// need more than context + 1 bytes; packing needs a document of 2 bytes
/// (DocumentPacker checks that).
std::vector<int64_t> readTokens(const std::string &path, int64_t vocab,
                                int64_t context, bool pack) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw std::runtime_error("cannot read --text " + path);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  if (!pack && static_cast<int64_t>(bytes.size()) < context + 2)
    throw std::runtime_error(path + ": needs more than context + 1 = " +
                             std::to_string(context + 1) + " bytes");
  std::vector<int64_t> ids(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    ids[i] = static_cast<unsigned char>(bytes[i]);
    if (ids[i] >= vocab)
      throw std::runtime_error(path + ": byte " + std::to_string(ids[i]) +
                               " at offset " + std::to_string(i) +
                               " is not < --vocab " + std::to_string(vocab));
  }
  return ids;
}

/// B random windows: tokens = text[s, s + T), targets = text[s + 1, s + T].
std::map<std::string, rt::HostTensor>
sampleBatch(const std::vector<int64_t> &text, const GPT2Config &cfg,
            Rng &rng) {
  rt::HostTensor tokens(rt::DType::I64, {cfg.batch, cfg.context});
  rt::HostTensor targets(rt::DType::I64, {cfg.batch, cfg.context});
  int64_t starts = static_cast<int64_t>(text.size()) - cfg.context;
  for (int64_t b = 0; b < cfg.batch; ++b) {
    int64_t s = rng.below(starts);
    for (int64_t t = 0; t < cfg.context; ++t) {
      tokens.data<int64_t>()[b * cfg.context + t] = text[s + t];
      targets.data<int64_t>()[b * cfg.context + t] = text[s + t + 1];
    }
  }
  return {{"tokens", tokens}, {"targets", targets}};
}

/// The batches of training: random windows, or packed documents (--pack).
/// The stream is seeded apart from the params' (paramSeed(seed, name)), so
/// changing the model never changes the data.
class Batches {
public:
  Batches(const Options &o, const std::vector<int64_t> &text)
      : cfg_(o.cfg), text_(text),
        windows_(paramSeed(o.seed, "batch:windows")) {
    if (!o.pack)
      return;
    try {
      packer_.emplace(gpt2::splitDocuments(text), cfg_.batch, cfg_.context,
                      paramSeed(o.seed, "batch:packed"));
    } catch (const std::invalid_argument &e) {
      throw std::runtime_error("--pack: " + o.text + ": " + e.what());
    }
  }

  std::map<std::string, rt::HostTensor> next() {
    if (!packer_)
      return sampleBatch(text_, cfg_, windows_);
    gpt2::PackedBatch b = packer_->next();
    slots_ += b.rows * b.context;
    filler_ += b.filler();
    predictions_ += b.predictions();
    return b.tensors();
  }

  /// One line about the documents and the slots used so far (--pack).
  std::string packingSummary() const {
    if (!packer_)
      return "";
    char line[200];
    std::snprintf(line, sizeof line,
                  "packing: %zu documents (%zu placed); %.1f%% of slots "
                  "filler, %.1f%% with a counted target",
                  packer_->documents().size(), packer_->placeable(),
                  100.0 * static_cast<double>(filler_) /
                      static_cast<double>(std::max<int64_t>(slots_, 1)),
                  100.0 * static_cast<double>(predictions_) /
                      static_cast<double>(std::max<int64_t>(slots_, 1)));
    return line;
  }

private:
  GPT2Config cfg_;
  const std::vector<int64_t> &text_;
  Rng windows_;
  std::optional<gpt2::DocumentPacker> packer_;
  int64_t slots_ = 0, filler_ = 0, predictions_ = 0;
};

/// The traced training graph: inputs tokens, targets [B, T] i64 (and, for
/// packed rows, positions and segments [B, T] i64); the loss.
void traceModel(Graph &g, const GPT2Config &cfg) {
  Tensor tokens = g.input("tokens", {cfg.batch, cfg.seqDim()}, DType::I64);
  Tensor targets = g.input("targets", {cfg.batch, cfg.seqDim()}, DType::I64);
  gpt2::PackedInputs packed;
  if (cfg.packed) {
    packed.positions = g.input("positions", {cfg.batch, cfg.context},
                               DType::I64);
    packed.segments = g.input("segments", {cfg.batch, cfg.context},
                              DType::I64);
  }
  g.output(gpt2::buildGPT2(g, cfg, tokens, targets, packed));
}

int emitModel(const Options &o, const std::vector<int64_t> &text) {
  Graph g(o.seed);
  traceModel(g, o.cfg);
  g.writeModel(o.emitModel);
  auto batch = Batches(o, text).next();
  fs::path inputs = fs::path(o.emitModel) / "inputs";
  fs::create_directories(inputs);
  for (const auto &[name, t] : batch)
    rt::writeNpy((inputs / (name + ".npy")).string(), t);
  // %.9g prints a float so that it reads back to the same bits. A model
  // with a symbolic T runs only once padded (stepc, step-bench).
  if (!o.cfg.dynamicContext)
    std::printf("loss = %.9g\n", g.run(batch)[0].getAsDouble(0));
  return 0;
}

/// Generates --sample bytes after the first T bytes of the text, sampling
/// each from softmax(logits) of the last position of a one-row model.
std::string generate(const Options &o, const std::vector<int64_t> &text,
                     const std::map<std::string, rt::HostTensor> &params) {
  GPT2Config one = o.cfg;
  one.batch = 1;
  // Generation feeds one window of the text: the unpacked model, which has
  // the same params as the packed one.
  one.packed = false;
  Graph g(o.seed);
  Tensor tokens = g.input("tokens", {1, one.context}, DType::I64);
  Tensor targets = g.input("targets", {1, one.context}, DType::I64);
  Tensor logits = gpt2::gpt2Logits(g, one, tokens);
  g.output(cross_entropy(logits, targets), logits);

  std::vector<int64_t> window(text.begin(), text.begin() + one.context);
  std::string outText;
  Rng rng(paramSeed(o.seed, "sample"));
  rt::HostTensor tok(rt::DType::I64, {1, one.context});
  for (int64_t i = 0; i < o.sample; ++i) {
    std::copy(window.begin(), window.end(), tok.data<int64_t>());
    rt::HostTensor l = g.run({{"tokens", tok}, {"targets", tok}}, &params)[1];
    const float *last = l.data<float>() + (one.context - 1) * one.vocab;
    float mx = *std::max_element(last, last + one.vocab);
    std::vector<double> cdf(one.vocab);
    double total = 0;
    for (int64_t v = 0; v < one.vocab; ++v)
      cdf[v] = total += std::exp(static_cast<double>(last[v] - mx));
    double u = rng.uniform() * total;
    int64_t next = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    next = std::min(next, one.vocab - 1);
    // Bytes outside printable ASCII (a small model samples some) would
    // garble the terminal: show them as \xNN.
    if (next == '\n' || (next >= 32 && next < 127)) {
      outText += static_cast<char>(next);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02llx", (long long)next);
      outText += esc;
    }
    window.erase(window.begin());
    window.push_back(next);
  }
  return outText;
}

int train(const Options &o, const std::vector<int64_t> &text) {
  step::TrainOptions t;
  t.optimizer.kind = step::OptimizerOptions::Kind::Adamw;
  t.optimizer.lr = o.lr;
  t.optimizer.weightDecay = o.wd;
  t.optimizer.decayVectors = false; // as nanoGPT: matrices and embeddings only
  t.schedule.kind = step::ScheduleOptions::Kind::Cosine;
  t.schedule.warmup = o.warmup;
  t.schedule.total = o.steps;
  t.schedule.minRatio = o.minLrRatio;
  if (o.clip > 0)
    t.clipNorm = o.clip;
  t.amp = step::AmpOptions::parse(o.amp, "", "auto");

  // The data first: a text that gives no batch fails before compiling.
  // --data: windows of train.tok, made ahead on a thread.
  std::unique_ptr<Batches> batches;
  std::unique_ptr<rt::Prefetcher> prefetcher;
  if (o.data.empty()) {
    batches = std::make_unique<Batches>(o, text);
  } else {
    rt::BatchSpec spec;
    spec.batch = o.cfg.batch;
    spec.context = o.cfg.context;
    spec.seed = paramSeed(o.seed, "batch:windows");
    prefetcher = std::make_unique<rt::Prefetcher>(
        std::make_shared<const rt::TokenFile>(
            (fs::path(o.data) / "train.tok").string()),
        spec);
  }
  auto t0 = std::chrono::steady_clock::now();
  step::JitOptions jo;
  jo.train = t;
  jo.seed = o.seed;
  step::Jit net = step::jit(
      [&](Graph &traced) { traceModel(traced, o.cfg); }, jo);
  step::Session &session = net.session();
  std::unique_ptr<gpt2::Validator> validator;
  if (o.evalEvery > 0) {
    Graph g(o.seed);
    traceModel(g, o.cfg);
    validator = std::make_unique<gpt2::Validator>(
        g.mlir(/*locations=*/true), (fs::path(o.data) / "val.tok").string(),
        o.cfg.batch, o.cfg.context, o.evalBatches, session.backend());
  }
  gpt2::EarlyStop stop(o.patience, o.minDelta);
  std::string valCsv = "step,val_loss\n";
  auto t1 = std::chrono::steady_clock::now();
  std::printf("gpt2: V=%lld T=%lld L=%lld H=%lld C=%lld B=%lld, %zu bytes "
              "of text; train step built in %.2f s\n",
              (long long)o.cfg.vocab, (long long)o.cfg.context,
              (long long)o.cfg.layers, (long long)o.cfg.heads,
              (long long)o.cfg.width, (long long)o.cfg.batch, text.size(),
              std::chrono::duration<double>(t1 - t0).count());

  std::vector<examples::LossPoint> curve;
  for (int64_t s = 0; s < o.steps; ++s) {
    double loss = net.step(prefetcher ? prefetcher->next() : batches->next());
    curve.push_back({s + 1, step::learningRate(t, s), loss});
    if (!std::isfinite(loss))
      throw std::runtime_error("loss is " + std::to_string(loss) +
                               " at step " + std::to_string(s + 1));
    if ((s + 1) % o.printEvery == 0 || s == 0 || s + 1 == o.steps) {
      double secs = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t1).count();
      std::printf("step %5lld/%lld  loss %.4f  lr %.2e  %.1f ms/step\n",
                  (long long)(s + 1), (long long)o.steps, loss, curve.back().lr,
                  1e3 * secs / static_cast<double>(s + 1));
      std::fflush(stdout);
    }
    if (validator && ((s + 1) % o.evalEvery == 0 || s + 1 == o.steps)) {
      double val = validator->loss(session);
      valCsv += std::to_string(s + 1) + "," + std::to_string(val) + "\n";
      bool done = stop.update(s + 1, val);
      std::printf("step %5lld/%lld  val loss %.4f  (best %.4f at step %lld)\n",
                  (long long)(s + 1), (long long)o.steps, val, stop.best(),
                  (long long)stop.bestStep());
      if (done) {
        std::printf("early stop: no improvement of more than %g in %lld "
                    "evaluations\n",
                    o.minDelta, (long long)o.patience);
        break;
      }
    }
  }

  if (o.pack)
    std::printf("%s\n", batches->packingSummary().c_str());
  if (prefetcher)
    std::printf("input: waited %.3f s for batches in all\n",
                prefetcher->totalWait());
  fs::create_directories(o.out);
  if (validator)
    rt::writeFileAtomic((fs::path(o.out) / "val.csv").string(), valCsv,
                        "val.csv");
  examples::writeLossCsv((fs::path(o.out) / "loss.csv").string(), curve);
  char title[160];
  std::snprintf(title, sizeof title,
                "GPT-2 L=%lld H=%lld C=%lld T=%lld B=%lld, AdamW lr %g",
                (long long)o.cfg.layers, (long long)o.cfg.heads,
                (long long)o.cfg.width, (long long)o.cfg.context,
                (long long)o.cfg.batch, o.lr);
  examples::writeLossSvg((fs::path(o.out) / "loss.svg").string(), curve, title);
  std::printf("wrote %s/loss.csv and %s/loss.svg\n", o.out.c_str(),
              o.out.c_str());
  if (o.sample > 0) {
    std::map<std::string, rt::HostTensor> trained;
    for (const std::string &name : session.paramNames())
      trained[name] = session.get(name);
    std::printf("sample:\n%s\n", generate(o, text, trained).c_str());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"Traces a GPT-2-style decoder and trains it on the bytes of a "
               "text with the reference interpreter, or emits the model."};
  app.add_option("--vocab", o.cfg.vocab, "vocabulary (byte-level: >= the "
                 "largest byte of the text + 1)")->capture_default_str();
  app.add_option("--context", o.cfg.context, "tokens per sequence (T)")
      ->capture_default_str();
  app.add_option("--layers", o.cfg.layers, "transformer blocks (L)")
      ->capture_default_str();
  app.add_option("--heads", o.cfg.heads, "attention heads (H)")
      ->capture_default_str();
  app.add_option("--width", o.cfg.width, "model width (C), a multiple of H")
      ->capture_default_str();
  app.add_option("--batch", o.cfg.batch, "sequences per batch (B)")
      ->capture_default_str();
  app.add_flag("--dynamic-context", o.cfg.dynamicContext,
               "with --emit-model: T symbolic, dyn(\"T\", context) "
               "(docs/dynamic-shapes.md)");
  app.add_flag("--checkpoint", o.cfg.checkpointBlocks,
               "each block in a checkpoint scope: its activations are "
               "recomputed in the backward (docs/remat.md)");
  app.add_flag("--pack", o.pack,
               "batches of whole documents (the text's paragraphs) packed "
               "into rows, block-diagonal causal attention (README)");
  app.add_option("--text", o.text, "training text (bytes are the tokens)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of params, batches and sampling")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "training updates")->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup", o.warmup, "linear warmup steps")
      ->capture_default_str();
  app.add_option("--min-lr-ratio", o.minLrRatio,
                 "final lr of the cosine decay, relative to --lr")
      ->capture_default_str();
  app.add_option("--wd", o.wd, "AdamW weight decay (applied to every param)")
      ->capture_default_str();
  app.add_option("--amp", o.amp,
                 "mixed precision: bf16 or fp16 (docs/amp.md); default f32");
  app.add_option("--clip", o.clip, "gradient norm clip (0: off)")
      ->capture_default_str();
  app.add_option("--print-every", o.printEvery, "steps between progress lines")
      ->capture_default_str();
  app.add_option("--sample", o.sample, "bytes to generate after training")
      ->capture_default_str();
  app.add_option("--out", o.out, "folder for loss.csv and loss.svg")
      ->capture_default_str();
  app.add_option("--emit-model", o.emitModel,
                 "write model.mlir, params/ and inputs/ here and exit");
  app.add_option("--prepare", o.prepare,
                 "write the text as DIR/train.tok and DIR/val.tok and exit");
  app.add_option("--val-fraction", o.valFraction,
                 "--prepare: the share of the text held out for validation")
      ->capture_default_str();
  CLI::Option *data = app.add_option(
      "--data", o.data,
      "train on DIR/train.tok (a prefetcher makes batches ahead)");
  CLI::Option *evalEvery =
      app.add_option("--eval-every", o.evalEvery,
                     "steps between validation losses on DIR/val.tok")
          ->needs(data);
  app.add_option("--eval-batches", o.evalBatches,
                 "validation batches per evaluation")
      ->needs(evalEvery)
      ->capture_default_str();
  CLI::Option *patience =
      app.add_option("--patience", o.patience,
                     "stop after this many evaluations without improvement")
          ->needs(evalEvery);
  app.add_option("--min-delta", o.minDelta,
                 "the least drop of the validation loss that counts")
      ->needs(patience)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.pack && !o.data.empty()) {
    std::cerr << "gpt2-example: --pack and --data exclude each other: "
                 "--data trains on windows of a token file\n";
    return 1;
  }

  if (o.pack && o.cfg.dynamicContext) {
    std::cerr << "gpt2-example: --pack and --dynamic-context exclude each "
                 "other: packed rows have the fixed length --context (a "
                 "tail no document fills is filler), nothing is padded to a "
                 "bucket\n";
    return 1;
  }
  o.cfg.packed = o.pack;
  if (std::string err = o.cfg.check(); !err.empty()) {
    std::cerr << "gpt2-example: " << err << "\n";
    return 1;
  }
  if (o.steps <= 0 || o.printEvery <= 0 || o.warmup < 0 ||
      o.warmup >= o.steps || o.sample < 0 || !(o.lr > 0)) {
    std::cerr << "gpt2-example: need steps > warmup >= 0, print-every > 0, "
                 "sample >= 0 and lr > 0\n";
    return 1;
  }
  try {
    std::vector<int64_t> text =
        readTokens(o.text, o.cfg.vocab, o.cfg.context, o.pack);
    if (o.sample > 0 && static_cast<int64_t>(text.size()) < o.cfg.context)
      throw std::runtime_error("--sample starts from the first context = " +
                               std::to_string(o.cfg.context) +
                               " bytes of the text, which has only " +
                               std::to_string(text.size()));
    if (!o.prepare.empty()) {
      std::printf("%s\n", gpt2::prepareTokens(o.prepare, text, o.valFraction,
                                              o.cfg.context)
                              .c_str());
      return 0;
    }
    return o.emitModel.empty() ? train(o, text) : emitModel(o, text);
  } catch (const std::exception &e) {
    std::cerr << "gpt2-example: error: " << e.what() << "\n";
    return 1;
  }
}
