//===- Packing.h - Packed batches of whole documents for GPT-2 --*- C++ -*-===//
//
// The alternative to padding variable-length documents (docs/dynamic-shapes.md):
// concatenate them into rows of exactly T tokens and tell the model where
// each one starts (GPT2Config::packed), so that attention stays inside a
// document and every wpe index restarts at 0.
//
// A batch is filled row by row from a stream of documents, shuffled anew
// (with a seeded Rng) on every pass over them:
//  - a document that fits a whole row (<= T tokens) and is not started is
//    placed whole; if it does not fit the row's tail, the tail becomes
//    filler and the document starts the next row;
//  - a longer document is cut where the row ends: it is split into pieces
//    of at most T tokens, each its own segment (positions restart at 0);
//  - filler: token kFillerToken, target kIgnoreTarget, its own segment.
//
// The target of a token is the next token of the same document, also
// across a cut (the loader knows it); the last token of a document gets
// kIgnoreTarget, so nothing is predicted across a document boundary and the
// mean loss counts real predictions only. A document's last token alone (a
// cut that would leave only it) is dropped: it predicts nothing and no
// other token of its segment would read it.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_EXAMPLES_GPT2_PACKING_H
#define STEP_EXAMPLES_GPT2_PACKING_H

#include "compiler/trace/Init.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpt2 {

/// The token of filler slots (byte 0: valid for every vocab).
inline constexpr int64_t kFillerToken = 0;

/// The documents of a byte-level text: the paragraphs, i.e. the maximal runs
/// of bytes without a blank line ("\n\n"). The newlines that separate them
/// are dropped (so are the text's leading and trailing ones); single
/// newlines inside a paragraph stay. Returns no empty document.
std::vector<std::vector<int64_t>>
splitDocuments(const std::vector<int64_t> &text);

/// One piece of a document in a PackedBatch: tokens [begin, begin + length)
/// of document `document`, in row `row` from column `column`.
struct Piece {
  int64_t row, column, document, begin, length;
};

/// A packed batch; the vectors are [rows, context], row-major.
struct PackedBatch {
  int64_t rows = 0, context = 0;
  std::vector<int64_t> tokens, targets, positions, segments;
  /// Where each token comes from, in placement order (filler has none).
  std::vector<Piece> pieces;

  /// Targets that count (not kIgnoreTarget): the divisor of the mean loss.
  int64_t predictions() const;
  /// Filler slots.
  int64_t filler() const;
  /// The model's inputs tokens, targets, positions and segments, [rows,
  /// context] i64 each.
  std::map<std::string, step::rt::HostTensor> tensors() const;
};

/// Packs documents into batches of `rows` rows of `context` tokens, as the
/// file comment says. Deterministic in `seed`.
class DocumentPacker {
public:
  /// Documents shorter than 2 tokens are never placed (they hold no
  /// prediction). Throws std::invalid_argument if rows or context is not
  /// positive or no document has 2 tokens or more.
  DocumentPacker(std::vector<std::vector<int64_t>> documents, int64_t rows,
                 int64_t context, uint64_t seed);

  /// The next batch. Every row holds at least one prediction.
  PackedBatch next();

  const std::vector<std::vector<int64_t>> &documents() const { return docs_; }
  /// The documents that are placed (2 tokens or more).
  size_t placeable() const { return order_.size(); }

private:
  /// Moves on to the next document, reshuffling after the last one.
  void advance();

  std::vector<std::vector<int64_t>> docs_;
  int64_t rows_, context_;
  step::trace::Rng rng_;
  /// Indices of the placeable documents in this pass's order.
  std::vector<int64_t> order_;
  size_t cursor_ = 0;  ///< order_[cursor_] is the current document
  int64_t offset_ = 0; ///< its tokens already placed
};

} // namespace gpt2

#endif // STEP_EXAMPLES_GPT2_PACKING_H
