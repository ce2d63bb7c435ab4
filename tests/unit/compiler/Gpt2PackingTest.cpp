//===- Gpt2PackingTest.cpp - GPT-2 packed rows are exact ------------------===//
//
// The packing loader of examples/gpt2 (Packing.h) and the packed model
// (GPT2Config::packed): the packer's batches follow its rules, and a packed
// batch gives, for every document in it, the logits, the loss and the
// gradients of the unpacked model run on that document alone at its exact
// length. The reference is an independent trace without the packed inputs
// (step.attention with its causal mask, wpe indexed by arange(L)).
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "compiler/trace/Trace.h"
#include "PipelineTestUtil.h"
#include "TraceTestUtil.h"
#include "examples/gpt2/Model.h"
#include "examples/gpt2/Packing.h"
#include "passes/Passes.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace {
using namespace step;
using namespace step::trace;
using step::trace::test::relErr;
using gpt2::DocumentPacker;
using gpt2::GPT2Config;
using gpt2::kIgnoreTarget;
using gpt2::PackedBatch;
using gpt2::Piece;
using Values = std::map<std::string, rt::HostTensor>;
using Docs = std::vector<std::vector<int64_t>>;

std::vector<int64_t> bytes(const std::string &s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

/// Documents of the given lengths, tokens uniform in [0, vocab).
Docs randomDocs(const std::vector<int64_t> &lengths, int64_t vocab,
                uint64_t seed) {
  Rng rng(seed);
  Docs docs;
  for (int64_t n : lengths) {
    docs.emplace_back(n);
    for (int64_t &t : docs.back())
      t = rng.below(vocab);
  }
  return docs;
}

//===----------------------------------------------------------------------===//
// splitDocuments
//===----------------------------------------------------------------------===//

TEST(SplitDocuments, ParagraphsSeparatedByBlankLines) {
  Docs got = gpt2::splitDocuments(
      bytes("\n\nTitle\n\nab\ncd\n\n\n\nefg\n\nh\n\n\n"));
  Docs want{bytes("Title"), bytes("ab\ncd"), bytes("efg"), bytes("h")};
  EXPECT_EQ(got, want);
  EXPECT_EQ(gpt2::splitDocuments(bytes("one line, no newline")),
            Docs{bytes("one line, no newline")});
  EXPECT_TRUE(gpt2::splitDocuments(bytes("\n\n\n")).empty());
}

//===----------------------------------------------------------------------===//
// DocumentPacker
//===----------------------------------------------------------------------===//

/// Checks every slot of `b` against the rules of Packing.h and appends its
/// pieces to `stream`.
void checkBatch(const PackedBatch &b, const Docs &docs, int64_t rows,
                int64_t context, std::vector<Piece> &stream) {
  ASSERT_EQ(b.rows, rows);
  ASSERT_EQ(b.context, context);
  for (const auto *v : {&b.tokens, &b.targets, &b.positions, &b.segments})
    ASSERT_EQ(v->size(), static_cast<size_t>(rows * context));
  size_t p = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t col = 0, segment = 0, predictions = 0;
    for (; p < b.pieces.size() && b.pieces[p].row == r; ++p, ++segment) {
      const Piece &piece = b.pieces[p];
      const std::vector<int64_t> &doc = docs.at(piece.document);
      int64_t size = static_cast<int64_t>(doc.size());
      SCOPED_TRACE("row " + std::to_string(r) + ", document " +
                   std::to_string(piece.document) + " [" +
                   std::to_string(piece.begin) + ", +" +
                   std::to_string(piece.length) + ")");
      EXPECT_EQ(piece.column, col); // pieces are back to back from column 0
      EXPECT_GE(piece.length, 1);
      EXPECT_LE(piece.length, context);
      EXPECT_LE(piece.begin + piece.length, size);
      if (size <= context) { // a document that fits a row is never cut
        EXPECT_TRUE(piece.begin == 0 && piece.length == size);
      }
      for (int64_t i = 0; i < piece.length; ++i) {
        int64_t slot = r * context + col + i, at = piece.begin + i;
        EXPECT_EQ(b.tokens[slot], doc[at]) << "slot " << slot;
        EXPECT_EQ(b.positions[slot], i) << "slot " << slot;
        EXPECT_EQ(b.segments[slot], segment) << "slot " << slot;
        // The next token of the same document; none after its last.
        EXPECT_EQ(b.targets[slot], at + 1 < size ? doc[at + 1] : kIgnoreTarget)
            << "slot " << slot;
        predictions += b.targets[slot] != kIgnoreTarget;
      }
      col += piece.length;
      stream.push_back(piece);
    }
    EXPECT_GE(predictions, 1) << "row " << r;
    for (; col < context; ++col) { // filler
      int64_t slot = r * context + col;
      EXPECT_EQ(b.tokens[slot], gpt2::kFillerToken) << "slot " << slot;
      EXPECT_EQ(b.targets[slot], kIgnoreTarget) << "slot " << slot;
      EXPECT_EQ(b.segments[slot], segment) << "slot " << slot;
      EXPECT_EQ(b.positions[slot], 0) << "slot " << slot;
    }
  }
  EXPECT_EQ(p, b.pieces.size()) << "pieces out of row order";
}

// Lengths around T = 16: too short to place (1), whole documents of every
// size up to T (one fills a row exactly), and longer ones cut into pieces.
TEST(DocumentPacker, BatchesFollowTheRules) {
  constexpr int64_t kRows = 3, kContext = 16;
  Docs docs = randomDocs({1, 2, 3, 5, 7, 9, 12, 16, 17, 23, 40}, 50, 7);
  DocumentPacker packer(docs, kRows, kContext, 11);
  ASSERT_EQ(packer.placeable(), 10u);
  std::vector<Piece> stream;
  int64_t filler = 0, predictions = 0;
  for (int i = 0; i < 40; ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    PackedBatch b = packer.next();
    checkBatch(b, docs, kRows, kContext, stream);
    filler += b.filler();
    predictions += b.predictions();
  }
  // The case exercises filler and rows of several documents.
  EXPECT_GT(filler, 0);
  EXPECT_GT(predictions, 0);

  // The stream of pieces, as visits of documents: a visit starts at token
  // 0 and its pieces are contiguous; it ends at the document's end, or one
  // token before it (a lone last token is dropped: it predicts nothing).
  std::vector<int64_t> visits;
  int64_t cuts = 0;
  for (size_t i = 0; i < stream.size();) {
    const Piece &first = stream[i];
    EXPECT_EQ(first.begin, 0) << "piece " << i;
    int64_t end = first.begin + first.length;
    size_t j = i + 1;
    for (; j < stream.size() && stream[j].document == first.document &&
           stream[j].begin == end;
         ++j)
      end += stream[j].length;
    cuts += static_cast<int64_t>(j - i - 1);
    int64_t size = static_cast<int64_t>(docs[first.document].size());
    // The last visit may be cut off by the end of the last batch.
    if (j < stream.size()) {
      EXPECT_TRUE(end == size || end == size - 1)
          << "document " << first.document << " ends at " << end << " of "
          << size;
    }
    visits.push_back(first.document);
    i = j;
  }
  EXPECT_GT(cuts, 0); // long documents are cut
  // Every pass over the documents is a permutation of the placeable ones,
  // and passes differ (reshuffled).
  size_t pass = packer.placeable();
  ASSERT_GE(visits.size(), 3 * pass);
  std::set<int64_t> placeable{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (size_t k = 0; k + pass <= visits.size(); k += pass)
    EXPECT_EQ(std::set<int64_t>(visits.begin() + k, visits.begin() + k + pass),
              placeable)
        << "pass " << k / pass;
  EXPECT_NE(std::vector<int64_t>(visits.begin(), visits.begin() + pass),
            std::vector<int64_t>(visits.begin() + pass,
                                 visits.begin() + 2 * pass));
}

TEST(DocumentPacker, SeedDecidesTheBatches) {
  Docs docs = randomDocs({4, 9, 13, 30, 6, 2}, 50, 3);
  DocumentPacker a(docs, 2, 8, 5), b(docs, 2, 8, 5), c(docs, 2, 8, 6);
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    PackedBatch x = a.next(), y = b.next(), z = c.next();
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.targets, y.targets);
    EXPECT_EQ(x.segments, y.segments);
    differs |= x.tokens != z.tokens;
  }
  EXPECT_TRUE(differs);
}

// T = 1: every row is one token of a cut document whose target is the next
// token; lone last tokens are dropped, so every slot counts.
TEST(DocumentPacker, ContextOfOneUsesEverySlot) {
  Docs docs = randomDocs({2, 5, 3}, 50, 9);
  DocumentPacker packer(docs, 4, 1, 1);
  std::vector<Piece> stream;
  for (int i = 0; i < 6; ++i) {
    PackedBatch b = packer.next();
    checkBatch(b, docs, 4, 1, stream);
    EXPECT_EQ(b.predictions(), 4);
    EXPECT_EQ(b.filler(), 0);
  }
}

TEST(DocumentPacker, RejectsNothingToPredict) {
  try {
    DocumentPacker(Docs{{1}, {2}}, 2, 8, 0);
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument &e) {
    EXPECT_STREQ(e.what(), "packing: no document has 2 tokens or more (2 "
                           "documents), so there is nothing to predict");
  }
  EXPECT_THROW(DocumentPacker(Docs{}, 2, 8, 0), std::invalid_argument);
  EXPECT_THROW(DocumentPacker(Docs{{1, 2}}, 0, 8, 0), std::invalid_argument);
  EXPECT_THROW(DocumentPacker(Docs{{1, 2}}, 2, 0, 0), std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// The packed model against each document alone
//===----------------------------------------------------------------------===//

constexpr int64_t kVocab = 32, kContext = 16, kRows = 2;

GPT2Config tinyConfig() {
  GPT2Config cfg;
  cfg.vocab = kVocab;
  cfg.context = kContext;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.width = 16;
  cfg.batch = kRows;
  cfg.packed = true;
  return cfg;
}

/// The model's inputs: tokens and targets, and for a packed model
/// positions and segments, all [B, T] i64.
struct Inputs {
  Tensor tokens, targets;
  gpt2::PackedInputs packed;
};

Inputs addInputs(Graph &g, const GPT2Config &cfg) {
  Inputs in;
  in.tokens = g.input("tokens", {cfg.batch, cfg.context}, DType::I64);
  in.targets = g.input("targets", {cfg.batch, cfg.context}, DType::I64);
  if (cfg.packed) {
    in.packed.positions =
        g.input("positions", {cfg.batch, cfg.context}, DType::I64);
    in.packed.segments =
        g.input("segments", {cfg.batch, cfg.context}, DType::I64);
  }
  return in;
}

/// Params of `cfg` drawn at a scale where attention is far from uniform
/// (GPT-2's init, N(0, 0.02), leaves it almost uniform, so a wrong mask
/// would move the logits little): N(0, 0.5), layer-norm weights 1 +
/// N(0, 0.2).
Values randomParams(const GPT2Config &cfg, uint64_t seed) {
  Graph g;
  Inputs in = addInputs(g, cfg);
  g.output(gpt2::buildGPT2(g, cfg, in.tokens, in.targets, in.packed));
  Values params = g.initialParams();
  Rng rng(seed);
  for (auto &[name, t] : params) {
    bool lnWeight = name.find("ln_") != std::string::npos &&
                    name.size() > 7 &&
                    name.compare(name.size() - 7, 7, ".weight") == 0;
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setFromDouble(i, lnWeight ? 1 + 0.2 * rng.normal()
                                  : 0.5 * rng.normal());
  }
  return params;
}

/// The first `rows` rows of the rank-2 f32 tensor `t` (wpe of a shorter
/// context).
rt::HostTensor leadingRows(const rt::HostTensor &t, int64_t rows) {
  rt::HostTensor out(t.dtype(), {rows, t.shape()[1]});
  std::memcpy(out.raw(), t.raw(), out.byteSize());
  return out;
}

/// What the tests compare: the mean loss (buildGPT2), the logits [B, T, V]
/// and the summed loss (gpt2Logits, cross_entropy with Reduction::Sum), and
/// the gradients of the summed loss by param name (step-autodiff on the
/// interpreter).
struct Outcome {
  double mean = 0, sum = 0;
  rt::HostTensor logits;
  Values grads;
};

Values merged(const Values &a, const Values &b) {
  Values out = a;
  out.insert(b.begin(), b.end());
  return out;
}

/// Gradients of @forward's loss: step-autodiff, then @forward_backward on
/// the interpreter; results named grad.<param>.
Values gradients(const std::string &model, const Values &values) {
  auto [names, results] = step::test::interpretAfter(
      model, "step-autodiff", "forward_backward", values);
  Values grads;
  for (size_t r = 0; r < names.size(); ++r)
    if (names[r].rfind("grad.", 0) == 0)
      grads[names[r].substr(5)] = results[r];
  return grads;
}

Outcome run(const GPT2Config &cfg, const Values &inputs, const Values &params) {
  Outcome out;
  Graph mean;
  Inputs in = addInputs(mean, cfg);
  mean.output(gpt2::buildGPT2(mean, cfg, in.tokens, in.targets, in.packed));
  out.mean = mean.run(inputs, &params)[0].getAsDouble(0);

  Graph sum;
  in = addInputs(sum, cfg);
  Tensor logits = gpt2::gpt2Logits(sum, cfg, in.tokens, in.packed);
  sum.output(cross_entropy(logits, in.targets, Reduction::Sum, kIgnoreTarget),
             logits);
  auto results = sum.run(inputs, &params);
  out.sum = results[0].getAsDouble(0);
  out.logits = results[1];
  out.grads = gradients(sum.mlir(), merged(inputs, params));
  return out;
}


/// A piece's [1, L] slice of a [B, T] i64 input.
rt::HostTensor pieceOf(const rt::HostTensor &t, const Piece &p) {
  rt::HostTensor out(rt::DType::I64, {1, p.length});
  std::memcpy(out.raw(), t.data<int64_t>() + p.row * kContext + p.column,
              p.length * sizeof(int64_t));
  return out;
}

/// The packed logits [B, T, V] of a piece, as [1, L, V].
rt::HostTensor pieceLogits(const rt::HostTensor &logits, const Piece &p) {
  rt::HostTensor out(rt::DType::F32, {1, p.length, kVocab});
  std::memcpy(out.raw(),
              logits.data<float>() + (p.row * kContext + p.column) * kVocab,
              out.byteSize());
  return out;
}

// The method: every piece of a packed batch (a whole document, or a window
// of one longer than T) is run alone through the UNPACKED model, traced
// with batch 1 and context = the piece's length L. Its params are the
// packed model's, except wpe: the reference has L rows and gets the first L
// rows of the packed wpe [T, C], which is exactly what the packed model
// reads, as a piece's positions are 0..L-1 and the unpacked model indexes
// wpe by arange(L). Its targets are the piece's (the next token of the
// document; ignored after its last). So for each piece the two compute the
// same function, and the packed model differs only in summation order:
//  - the piece's logits, rel. err. <= 1e-5 (normwise per piece): the
//    reference's step.attention sums scores in double, the packed path
//    through matmul and softmax kernels in f32 rounding; we see ~1e-7;
//  - the packed summed loss = the sum of the pieces' summed losses, and
//    the packed mean = their token-weighted mean (weights: the counted
//    targets of each piece), <= 1e-5 relative;
//  - the gradient of the summed loss = the sum over pieces of theirs (wpe:
//    the reference's L rows added into the first L), <= 1e-5 normwise.
// Filler contributes no counted target and no real token attends to it.
constexpr double kTol = 1e-5;

/// A packed batch of the tiny config from documents of 5, 9, 3, 7, 20, 4
/// and 6 tokens: the first packer seed whose first batch has rows of
/// several documents (5 pieces or more), a document cut at a row's end (the
/// one of 20 > T) and filler, so each case is exercised.
PackedBatch richBatch(Docs &docs) {
  docs = randomDocs({5, 9, 3, 7, 20, 4, 6}, kVocab, 21);
  for (uint64_t seed = 0; seed < 100; ++seed) {
    PackedBatch b = DocumentPacker(docs, kRows, kContext, seed).next();
    bool cut = std::any_of(b.pieces.begin(), b.pieces.end(), [&](auto &p) {
      return p.length < static_cast<int64_t>(docs[p.document].size());
    });
    if (b.pieces.size() >= 5 && cut && b.filler() > 0)
      return b;
  }
  ADD_FAILURE() << "no packer seed below 100 gives the batch wanted";
  return {};
}

TEST(PackedGPT2, EachDocumentAsIfAlone) {
  GPT2Config cfg = tinyConfig();
  Docs docs;
  PackedBatch batch = richBatch(docs);
  ASSERT_FALSE(batch.pieces.empty());
  Values inputs = batch.tensors(), params = randomParams(cfg, 8);
  Outcome packed = run(cfg, inputs, params);

  GPT2Config alone = cfg;
  alone.packed = false;
  alone.batch = 1;
  double sum = 0, weighted = 0, worstLogits = 0;
  int64_t counted = 0;
  Values gradSum;
  for (const auto &[name, g] : packed.grads) {
    gradSum[name] = rt::HostTensor(g.dtype(), g.shape()); // zeros
    std::memset(gradSum[name].raw(), 0, g.byteSize());
  }
  for (const Piece &p : batch.pieces) {
    SCOPED_TRACE("piece of document " + std::to_string(p.document) +
                 " at row " + std::to_string(p.row) + ", column " +
                 std::to_string(p.column) + ", " + std::to_string(p.length) +
                 " tokens");
    alone.context = p.length;
    Values refParams = params;
    refParams["wpe"] = leadingRows(params.at("wpe"), p.length);
    Values refInputs{{"tokens", pieceOf(inputs.at("tokens"), p)},
                     {"targets", pieceOf(inputs.at("targets"), p)}};
    Outcome ref = run(alone, refInputs, refParams);
    double err = relErr(pieceLogits(packed.logits, p), ref.logits);
    worstLogits = std::max(worstLogits, err);
    EXPECT_LE(err, kTol);
    int64_t n = 0;
    for (int64_t i = 0; i < p.length; ++i)
      n += refInputs.at("targets").data<int64_t>()[i] != kIgnoreTarget;
    sum += ref.sum;
    if (n > 0) // a mean over no counted target is NaN: nothing to weigh
      weighted += ref.mean * static_cast<double>(n);
    counted += n;
    for (const auto &[name, g] : ref.grads) // wpe: L rows into the first L
      for (int64_t i = 0; i < g.numel(); ++i)
        gradSum[name].setFromDouble(
            i, gradSum[name].getAsDouble(i) + g.getAsDouble(i));
  }
  ASSERT_EQ(counted, batch.predictions());
  EXPECT_NEAR(packed.sum, sum, kTol * std::fabs(sum));
  EXPECT_NEAR(packed.mean, weighted / static_cast<double>(counted),
              kTol * std::fabs(packed.mean));
  double worstGrad = 0;
  ASSERT_EQ(packed.grads.size(), params.size());
  for (const auto &[name, g] : packed.grads) {
    double err = relErr(g, gradSum.at(name));
    worstGrad = std::max(worstGrad, err);
    EXPECT_LE(err, kTol) << "grad." << name;
  }
  std::printf("packed vs alone: %zu pieces, %lld counted targets, %lld "
              "filler; logits rel. err. %.2e, mean loss %.9g vs %.9g, "
              "gradients rel. err. %.2e\n",
              batch.pieces.size(), (long long)counted,
              (long long)batch.filler(), worstLogits, packed.mean,
              weighted / static_cast<double>(counted), worstGrad);
}

// The comparison above can fail: the same batch with every segment id 0
// (plain causal attention over the whole row, i.e. the mask without its
// segment condition) must NOT match the documents alone wherever a piece
// has another one before it in its row.
TEST(PackedGPT2, WithoutTheSegmentConditionDocumentsLeak) {
  GPT2Config cfg = tinyConfig();
  Docs docs;
  PackedBatch batch = richBatch(docs);
  Values inputs = batch.tensors(), params = randomParams(cfg, 8);
  std::memset(inputs.at("segments").raw(), 0,
              inputs.at("segments").byteSize());
  Outcome leaky = run(cfg, inputs, params);
  GPT2Config alone = cfg;
  alone.packed = false;
  alone.batch = 1;
  int checked = 0;
  for (const Piece &p : batch.pieces) {
    if (p.column == 0)
      continue; // nothing before it in its row: no leak possible
    alone.context = p.length;
    Values refParams = params;
    refParams["wpe"] = leadingRows(params.at("wpe"), p.length);
    Outcome ref = run(alone,
                  {{"tokens", pieceOf(inputs.at("tokens"), p)},
                   {"targets", pieceOf(inputs.at("targets"), p)}},
                  refParams);
    EXPECT_GT(relErr(pieceLogits(leaky.logits, p), ref.logits), 1e-2)
        << "document " << p.document;
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

TEST(PackedGPT2, RejectsMismatchedInputs) {
  GPT2Config cfg = tinyConfig();
  Graph g;
  Inputs in = addInputs(g, cfg);
  EXPECT_THROW(gpt2::gpt2Logits(g, cfg, in.tokens), std::invalid_argument);
  GPT2Config plain = cfg;
  plain.packed = false;
  EXPECT_THROW(gpt2::gpt2Logits(g, plain, in.tokens, in.packed),
               std::invalid_argument);
  GPT2Config dynamic = cfg;
  dynamic.dynamicContext = true;
  EXPECT_NE(dynamic.check().find("exclude each other"), std::string::npos);
  Graph h;
  Tensor tokens = h.input("tokens", {kRows, kContext}, DType::I64);
  gpt2::PackedInputs bad{h.input("positions", {kRows, kContext - 1},
                                 DType::I64),
                         h.input("segments", {kRows, kContext}, DType::I64)};
  EXPECT_THROW(gpt2::gpt2Logits(h, cfg, tokens, bad), ShapeError);
}

} // namespace
