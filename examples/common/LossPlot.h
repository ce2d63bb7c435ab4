//===- LossPlot.h - Loss curve as CSV and as a standalone SVG ---*- C++ -*-===//
//
// The training record of the examples: one row per update. Written as
// `loss.csv` (step,lr,loss) and `loss.svg`, a hand-written line plot that
// any browser shows, so the example needs no plotting library.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_EXAMPLES_COMMON_LOSSPLOT_H
#define STEP_EXAMPLES_COMMON_LOSSPLOT_H

#include <cstdint>
#include <string>
#include <vector>

namespace examples {

struct LossPoint {
  int64_t step; // 1-based update number
  double lr;    // learning rate the update used
  double loss;  // training loss of its batch (before the update)
};

/// Writes `path` as CSV with the header "step,lr,loss"; throws
/// std::runtime_error when the file cannot be written.
void writeLossCsv(const std::string &path, const std::vector<LossPoint> &pts);

/// Writes `path` as an SVG line plot of loss against step, with axes, tick
/// labels and `title`; throws std::runtime_error when it cannot be written.
void writeLossSvg(const std::string &path, const std::vector<LossPoint> &pts,
                  const std::string &title);

} // namespace examples

#endif // STEP_EXAMPLES_COMMON_LOSSPLOT_H
