//===- Data.h - Token files, validation and early stopping for GPT-2 -*- C++ -*-===//
//
// The GPT-2 example's input pipeline (docs/data.md):
//   - prepareTokens: a text's bytes as two token files, train.tok and
//     val.tok, the last `valFraction` of the text held out;
//   - Validator: the model's forward pass compiled on its own
//     (step::compileForward: no backward, no optimizer) and run on a fixed
//     set of validation batches (sequential windows of val.tok) with the
//     training session's current params: the mean validation loss;
//   - EarlyStop: stops when the validation loss has not improved by more
//     than `minDelta` for `patience` evaluations in a row.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_EXAMPLES_GPT2_DATA_H
#define STEP_EXAMPLES_GPT2_DATA_H

#include "runtime/Session.h"
#include "runtime/TokenData.h"

#include <memory>
#include <string>
#include <vector>

namespace gpt2 {

/// Writes DIR/train.tok and DIR/val.tok: `text`'s first (1 - valFraction)
/// and last valFraction of tokens, one byte each when every token is below
/// 256, else two or four. Each part must hold more than `context` tokens
/// (std::runtime_error otherwise, nothing written). Returns a line saying
/// what was written.
std::string prepareTokens(const std::string &dir,
                          const std::vector<int64_t> &text, double valFraction,
                          int64_t context);

class Validator {
public:
  /// Compiles `modelMlir`'s forward for `backend` and maps `valPath`;
  /// each evaluation runs `batches` batches of [batch, context].
  Validator(const std::string &modelMlir, const std::string &valPath,
            int64_t batch, int64_t context, int64_t batches,
            step::Backend backend);
  /// The mean loss over the validation batches with `train`'s params.
  double loss(const step::Session &train);

private:
  std::unique_ptr<step::Session> session_;
  std::shared_ptr<const step::rt::TokenFile> file_;
  step::rt::BatchSpec spec_;
  int64_t batches_;
};

class EarlyStop {
public:
  EarlyStop(int64_t patience, double minDelta)
      : patience_(patience), minDelta_(minDelta) {}
  /// Takes the validation loss measured after `step`; true when training
  /// should stop (patience > 0 and `patience` evaluations in a row without
  /// an improvement of more than minDelta over the best).
  bool update(int64_t step, double loss);
  double best() const { return best_; }
  int64_t bestStep() const { return bestStep_; }

private:
  int64_t patience_;
  double minDelta_;
  double best_ = 0;
  int64_t bestStep_ = -1, stale_ = 0;
};

} // namespace gpt2

#endif // STEP_EXAMPLES_GPT2_DATA_H
