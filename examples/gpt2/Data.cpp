//===- Data.cpp - Token files, validation and early stopping for GPT-2 ----===//

#include "examples/gpt2/Data.h"

#include "compiler/jit/Jit.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace fs = std::filesystem;
namespace rt = step::rt;

namespace gpt2 {

std::string prepareTokens(const std::string &dir,
                          const std::vector<int64_t> &text, double valFraction,
                          int64_t context) {
  if (!(valFraction > 0 && valFraction < 1))
    throw std::runtime_error("--val-fraction must be in (0, 1), not " +
                             std::to_string(valFraction));
  auto n = static_cast<int64_t>(text.size());
  auto val = static_cast<int64_t>(std::llround(n * valFraction));
  int64_t train = n - val;
  if (train <= context || val <= context)
    throw std::runtime_error(
        "the text's " + std::to_string(n) + " tokens split into " +
        std::to_string(train) + " for training and " + std::to_string(val) +
        " for validation; each needs more than --context = " +
        std::to_string(context));
  int64_t largest = *std::max_element(text.begin(), text.end());
  int width = largest < 256 ? 1 : largest < 65536 ? 2 : 4;
  fs::create_directories(dir);
  std::vector<uint32_t> part(text.begin(), text.begin() + train);
  rt::writeTokenFile((fs::path(dir) / "train.tok").string(), part, width);
  part.assign(text.begin() + train, text.end());
  rt::writeTokenFile((fs::path(dir) / "val.tok").string(), part, width);
  return "wrote " + dir + "/train.tok (" + std::to_string(train) +
         " tokens) and " + dir + "/val.tok (" + std::to_string(val) +
         " tokens), " + std::to_string(width) + " byte(s) per token";
}

Validator::Validator(const std::string &modelMlir, const std::string &valPath,
                     int64_t batch, int64_t context, int64_t batches,
                     step::Backend backend)
    : file_(std::make_shared<const rt::TokenFile>(valPath)),
      batches_(batches) {
  if (batches_ < 1)
    throw std::runtime_error("--eval-batches must be at least 1");
  step::SessionOptions options;
  options.backend = backend;
  session_ = std::make_unique<step::Session>(step::compileForward(modelMlir),
                                             options);
  spec_.batch = batch;
  spec_.context = context;
  spec_.sequential = true; // the same windows at every evaluation
  rt::tokenBatch(*file_, spec_, 0); // a file too short fails here
}

double Validator::loss(const step::Session &train) {
  for (const std::string &name : session_->paramNames())
    session_->set(name, train.get(name));
  double sum = 0;
  for (int64_t k = 0; k < batches_; ++k)
    sum += session_->step(rt::tokenBatch(*file_, spec_, k));
  return sum / static_cast<double>(batches_);
}

bool EarlyStop::update(int64_t step, double loss) {
  if (bestStep_ < 0 || loss < best_ - minDelta_) {
    best_ = loss;
    bestStep_ = step;
    stale_ = 0;
    return false;
  }
  ++stale_;
  return patience_ > 0 && stale_ >= patience_;
}

} // namespace gpt2
