//===- Packing.cpp - Packed batches of whole documents for GPT-2 ----------===//
//
// The rules are in Packing.h. Cost: one pass over the B*T slots per batch;
// no token is copied more than once.
//
//===----------------------------------------------------------------------===//

#include "examples/gpt2/Packing.h"

#include "examples/gpt2/Model.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace gpt2 {

std::vector<std::vector<int64_t>>
splitDocuments(const std::vector<int64_t> &text) {
  std::vector<std::vector<int64_t>> docs;
  std::vector<int64_t> current;
  auto finish = [&] {
    // A paragraph's own trailing newline (before the blank line, or at the
    // end of the text) belongs to the separator.
    while (!current.empty() && current.back() == '\n')
      current.pop_back();
    if (!current.empty())
      docs.push_back(std::move(current));
    current.clear();
  };
  size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    if (text[i] == '\n' && i + 1 < n && text[i + 1] == '\n') {
      finish();
      while (i + 1 < n && text[i + 1] == '\n')
        ++i;
      continue;
    }
    // Leading newlines of the text (or of a paragraph after a separator
    // run, which the loop above already consumed) start no document.
    if (current.empty() && text[i] == '\n')
      continue;
    current.push_back(text[i]);
  }
  finish();
  return docs;
}

int64_t PackedBatch::predictions() const {
  return std::count_if(targets.begin(), targets.end(),
                       [](int64_t t) { return t != kIgnoreTarget; });
}

int64_t PackedBatch::filler() const {
  int64_t placed = 0;
  for (const Piece &p : pieces)
    placed += p.length;
  return rows * context - placed;
}

std::map<std::string, step::rt::HostTensor> PackedBatch::tensors() const {
  std::map<std::string, step::rt::HostTensor> out;
  for (auto [name, v] :
       {std::pair<const char *, const std::vector<int64_t> *>{"tokens",
                                                              &tokens},
        {"targets", &targets},
        {"positions", &positions},
        {"segments", &segments}}) {
    step::rt::HostTensor t(step::rt::DType::I64, {rows, context});
    std::memcpy(t.raw(), v->data(), v->size() * sizeof(int64_t));
    out[name] = std::move(t);
  }
  return out;
}

DocumentPacker::DocumentPacker(std::vector<std::vector<int64_t>> documents,
                               int64_t rows, int64_t context, uint64_t seed)
    : docs_(std::move(documents)), rows_(rows), context_(context),
      rng_(seed) {
  if (rows <= 0 || context <= 0)
    throw std::invalid_argument("packing: rows and context must be positive");
  for (size_t d = 0; d < docs_.size(); ++d)
    if (docs_[d].size() >= 2)
      order_.push_back(static_cast<int64_t>(d));
  if (order_.empty())
    throw std::invalid_argument(
        "packing: no document has 2 tokens or more (" +
        std::to_string(docs_.size()) +
        " documents), so there is nothing to predict");
  cursor_ = order_.size(); // the first advance() shuffles
  advance();
}

void DocumentPacker::advance() {
  offset_ = 0;
  if (++cursor_ < order_.size())
    return;
  // Fisher-Yates with the packer's own stream: each pass is a fresh
  // permutation, reproducible from the seed.
  for (size_t i = order_.size() - 1; i > 0; --i)
    std::swap(order_[i], order_[rng_.below(static_cast<int64_t>(i) + 1)]);
  cursor_ = 0;
}

PackedBatch DocumentPacker::next() {
  PackedBatch b;
  b.rows = rows_;
  b.context = context_;
  size_t slots = static_cast<size_t>(rows_ * context_);
  b.tokens.assign(slots, kFillerToken);
  b.targets.assign(slots, kIgnoreTarget);
  b.positions.assign(slots, 0);
  b.segments.assign(slots, 0);
  for (int64_t r = 0; r < rows_; ++r) {
    int64_t col = 0, segment = 0;
    while (col < context_) {
      int64_t d = order_[cursor_];
      const std::vector<int64_t> &doc = docs_[d];
      int64_t size = static_cast<int64_t>(doc.size());
      int64_t rest = size - offset_, space = context_ - col;
      // Keep a document that fits a row whole: start it on the next row.
      // col > 0 here, since rest <= context_ fits an empty row.
      if (offset_ == 0 && rest <= context_ && rest > space)
        break;
      int64_t take = std::min(rest, space);
      b.pieces.push_back({r, col, d, offset_, take});
      for (int64_t i = 0; i < take; ++i) {
        int64_t at = offset_ + i, slot = r * context_ + col + i;
        b.tokens[slot] = doc[at];
        b.targets[slot] = at + 1 < size ? doc[at + 1] : kIgnoreTarget;
        b.positions[slot] = i;
        b.segments[slot] = segment;
      }
      col += take;
      ++segment;
      offset_ += take;
      // Done, or only the last token is left: it predicts nothing (see
      // Packing.h), so the document ends here.
      if (size - offset_ <= 1)
        advance();
    }
    // Filler: a segment of its own (ids stay increasing along the row), so
    // no real token could see it even without the causal mask.
    for (; col < context_; ++col)
      b.segments[r * context_ + col] = segment;
  }
  return b;
}

} // namespace gpt2
