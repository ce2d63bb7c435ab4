//===- FusionChunks.h - Loop fusions in cache-sized chunks ------*- C++ -*-===//
//
// Internal to runtime/cpu: the chunked path of a fusion step
// (FusionChunks.cpp explains when it applies and why it is exact).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_CPU_FUSIONCHUNKS_H
#define STEP_RUNTIME_CPU_FUSIONCHUNKS_H

#include "runtime/Plan.h"

#include <optional>
#include <vector>

namespace step::rt::cpu {

/// The results of fusion body `body` on `operands`, computed chunk by chunk,
/// or std::nullopt (operands untouched) when the body is not a loop of
/// elementwise ops and views over at least two chunks, or the operands do
/// not match its arguments; the caller then runs it op by op. Bitwise the
/// op-by-op results.
std::optional<std::vector<HostTensor>>
runFusionInChunks(const Plan &body, std::vector<HostTensor> &operands);

} // namespace step::rt::cpu

#endif // STEP_RUNTIME_CPU_FUSIONCHUNKS_H
