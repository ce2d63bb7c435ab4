//===- FusionChunks.cpp - Loop fusions in cache-sized chunks --------------===//
//
// The CPU backend runs a fusion's body op by op on the unfused kernels
// (EvalStep.cpp), each op over whole tensors: a chain of twenty ops (as
// GELU's backward was, written out) on 4 MB tensors moves ~250 MB through
// memory. For a body of elementwise ops and views whose results all have
// N elements (a loop fusion), this runs the same kernels on chunks of
// kChunk elements instead, so every N-element value exists one chunk at a
// time, in cache, and main memory sees each input and result once, as the
// GPU's fused kernel does.
//
// Guarantee: the same bits as op by op. An elementwise kernel computes
// element i from element i of its operands alone (dropout, whose mask
// hashes the index, stays on the op-by-op path), and views only move bytes.
//
// Algorithm: a body qualifies when every N-element value is made by an
// elementwise op, a reshape or stop_gradient, an iota, or a
// broadcast_in_dim (of a smaller value, or of an N-element one in its flat
// order); values of fewer elements (a rank-0 scale, a bias) are made from
// smaller values only. Those are computed first, whole, by the op kernels.
// Then per chunk [c0, c1): the N-element inputs are copied out, each step
// runs on the chunk (a broadcast gathers through its index map, an iota
// computes its flat indices' coordinate), and the results are copied into
// place. The chunks are independent, so the update threads
// (updateThreads()) share them, at least kMinChunksPerThread each. Cost:
// the op-by-op arithmetic plus one index computation per
// gathered element; memory traffic of the inputs and results only.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/FusionChunks.h"

#include "runtime/cpu/EvalStep.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/Kernels.h"

#include <cstring>
#include <set>

namespace step::rt::cpu {

namespace {

constexpr int64_t kChunk = 4096;
/// Chunks a thread takes at least (64 K elements).
constexpr int64_t kMinChunksPerThread = 16;

bool isElementwise(const std::string &op) {
  static const std::set<std::string> ops = {
      "step.neg",       "step.exp",     "step.log",    "step.tanh",
      "step.sigmoid",   "step.relu",    "step.sqrt",   "step.rsqrt",
      "step.abs",       "step.erf",     "step.sin",    "step.cos",
      "step.gelu",      "step.add",     "step.sub",    "step.mul",
      "step.div",       "step.max",     "step.min",    "step.pow",
      "step.gelu_grad", "step.compare", "step.select", "step.cast"};
  return ops.count(op) > 0;
}

bool isCopy(const std::string &op) {
  return op == "step.reshape" || op == "step.stop_gradient";
}

/// broadcast_in_dim's dims in increasing order: with equal element counts
/// the result holds the operand's elements in the same flat order.
bool keepsFlatOrder(const PlanStep &s) {
  std::vector<int64_t> dims =
      s.attrs.value("broadcast_dimensions", std::vector<int64_t>());
  for (size_t k = 1; k < dims.size(); ++k)
    if (dims[k] <= dims[k - 1])
      return false;
  return true;
}

/// N, and which buffers have N elements, when `body` qualifies.
struct Layout {
  int64_t n = 0;
  std::vector<bool> big;
};

std::optional<Layout> analyze(const Plan &body) {
  if (body.results.empty())
    return std::nullopt;
  Layout l;
  l.n = numElements(body.buffers[body.results[0]].shape);
  // Below two chunks the op-by-op path is as fast.
  if (l.n < 2 * kChunk)
    return std::nullopt;
  for (int64_t id : body.results)
    if (numElements(body.buffers[id].shape) != l.n)
      return std::nullopt;
  for (const BufferDesc &d : body.buffers)
    l.big.push_back(numElements(d.shape) == l.n);
  for (const PlanStep &s : body.steps) {
    if (s.results.size() != 1)
      return std::nullopt;
    bool anyBigOperand = false;
    for (int64_t o : s.operands)
      anyBigOperand = anyBigOperand || l.big[o];
    if (!l.big[s.results[0]]) {
      if (anyBigOperand)
        return std::nullopt; // a reduction of some kind
      continue;
    }
    if (isElementwise(s.op)) {
      for (int64_t o : s.operands)
        if (!l.big[o])
          return std::nullopt;
    } else if (isCopy(s.op)) {
      if (!l.big[s.operands.at(0)])
        return std::nullopt;
    } else if (s.op == "step.broadcast_in_dim") {
      if (!s.attrs.contains("broadcast_dimensions") ||
          (l.big[s.operands.at(0)] && !keepsFlatOrder(s)))
        return std::nullopt;
    } else if (s.op != "step.iota" || !s.attrs.contains("dimension")) {
      return std::nullopt; // (a malformed step: op by op reports it)
    }
  }
  return l;
}

HostTensor sliceOf(const HostTensor &t, int64_t from, int64_t count) {
  HostTensor out(t.dtype(), {count});
  size_t e = dtypeSize(t.dtype());
  std::memcpy(out.raw(), static_cast<const uint8_t *>(t.raw()) + from * e,
              count * e);
  return out;
}

/// Elements [from, from + count) of broadcast_in_dim(x) with `shape`.
HostTensor gather(const HostTensor &x, const Shape &shape,
                  const std::vector<int64_t> &dims, int64_t from,
                  int64_t count) {
  // The stride in x of each result dim (0 where it is broadcast).
  std::vector<int64_t> stride(shape.size(), 0);
  int64_t s = 1;
  for (size_t k = x.shape().size(); k-- > 0;) {
    if (x.shape()[k] != 1)
      stride.at(dims.at(k)) = s;
    s *= x.shape()[k];
  }
  HostTensor out(x.dtype(), {count});
  size_t e = dtypeSize(x.dtype());
  const uint8_t *src = static_cast<const uint8_t *>(x.raw());
  uint8_t *dst = static_cast<uint8_t *>(out.raw());
  if (x.numel() == 1) { // a scalar: every element is the same
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(dst + i * e, src, e);
    return out;
  }
  // The coordinates of element `from`, then stepped like an odometer.
  size_t rank = shape.size();
  std::vector<int64_t> idx(rank);
  int64_t at = 0;
  for (size_t d = rank, rem = from; d-- > 0;) {
    idx[d] = static_cast<int64_t>(rem) % shape[d];
    rem /= shape[d];
    at += idx[d] * stride[d];
  }
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * e, src + at * e, e);
    for (size_t d = rank; d-- > 0;) {
      at += stride[d];
      if (++idx[d] < shape[d])
        break;
      at -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

/// Elements [from, from + count) of iota(dtype, shape, dim).
HostTensor iotaChunk(DType dtype, const Shape &shape, int64_t dim,
                     int64_t from, int64_t count) {
  int64_t rank = static_cast<int64_t>(shape.size());
  if (dim < 0)
    dim += rank;
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= shape[d];
  HostTensor out(dtype, {count});
  for (int64_t i = 0; i < count; ++i)
    out.setFromDouble(i, static_cast<double>(((from + i) / inner) %
                                             shape.at(dim)));
  return out;
}

} // namespace

std::optional<std::vector<HostTensor>>
runFusionInChunks(const Plan &body, std::vector<HostTensor> &operands) {
  std::optional<Layout> layout = analyze(body);
  if (!layout || operands.size() != body.arguments.size())
    return std::nullopt;
  for (size_t i = 0; i < operands.size(); ++i) {
    const BufferDesc &d = body.buffers[body.arguments[i]];
    if (operands[i].dtype() != d.dtype || operands[i].shape() != d.shape)
      return std::nullopt; // the op-by-op path reports it
  }
  const std::vector<bool> &big = layout->big;
  int64_t n = layout->n;
  std::vector<HostTensor> whole(body.buffers.size());
  for (size_t i = 0; i < operands.size(); ++i)
    whole[body.arguments[i]] = std::move(operands[i]);
  // The small values, whole, in program order.
  for (const PlanStep &s : body.steps) {
    if (big[s.results[0]])
      continue;
    std::vector<HostTensor> in;
    for (int64_t o : s.operands)
      in.push_back(whole[o]);
    whole[s.results[0]] = std::move(evalStep(body, s, std::move(in)).at(0));
  }
  // The last chunk step reading each buffer: there its chunk is moved.
  std::vector<int64_t> lastRead(body.buffers.size(), -1);
  for (size_t k = 0; k < body.steps.size(); ++k)
    for (int64_t o : body.steps[k].operands)
      lastRead[o] = static_cast<int64_t>(k);
  for (int64_t id : body.results)
    lastRead[id] = static_cast<int64_t>(body.steps.size());
  std::vector<HostTensor> results;
  for (int64_t id : body.results)
    results.emplace_back(body.buffers[id].dtype, body.buffers[id].shape);
  // The chunks are independent (each writes its own range of the
  // results), so the update threads share them: the same bits for every
  // thread count.
  auto runChunk = [&](std::vector<HostTensor> &chunk, int64_t c0) {
    int64_t count = std::min(kChunk, n - c0);
    for (int64_t id : body.arguments)
      if (big[id])
        chunk[id] = sliceOf(whole[id], c0, count);
    for (size_t k = 0; k < body.steps.size(); ++k) {
      const PlanStep &s = body.steps[k];
      int64_t r = s.results[0];
      if (!big[r])
        continue;
      // Operand j's chunk, moved at its buffer's last read (the last
      // occurrence in this step: `mul %x, %x` reads it twice).
      auto operand = [&](size_t j) {
        int64_t o = s.operands.at(j);
        bool last = lastRead[o] == static_cast<int64_t>(k);
        for (size_t later = j + 1; last && later < s.operands.size(); ++later)
          last = s.operands[later] != o;
        return last ? std::move(chunk[o]) : chunk[o];
      };
      if (isElementwise(s.op)) {
        std::vector<HostTensor> in;
        for (size_t j = 0; j < s.operands.size(); ++j)
          in.push_back(operand(j));
        chunk[r] = std::move(evalStep(body, s, std::move(in)).at(0));
      } else if (s.op == "step.iota") {
        chunk[r] = iotaChunk(body.buffers[r].dtype, body.buffers[r].shape,
                             s.attrs.at("dimension").get<int64_t>(), c0,
                             count);
      } else if (s.op == "step.broadcast_in_dim" && !big[s.operands[0]]) {
        chunk[r] = gather(whole[s.operands[0]], body.buffers[r].shape,
                          s.attrs.value("broadcast_dimensions",
                                        std::vector<int64_t>()),
                          c0, count);
      } else { // a copy in flat order
        chunk[r] = operand(0);
      }
      if (chunk[r].dtype() != body.buffers[r].dtype)
        throw Error("step.fusion: " + s.op + " gave " +
                    dtypeName(chunk[r].dtype()) + " for the body buffer " +
                    body.buffers[r].name + " of " +
                    dtypeName(body.buffers[r].dtype));
    }
    for (size_t k = 0; k < body.results.size(); ++k) {
      const HostTensor &c = chunk[body.results[k]];
      size_t e = dtypeSize(c.dtype());
      std::memcpy(static_cast<uint8_t *>(results[k].raw()) + c0 * e, c.raw(),
                  count * e);
    }
  };
  int64_t chunks = (n + kChunk - 1) / kChunk;
  detail::forRanges(chunks, kMinChunksPerThread, updateThreads(),
                    [&](int64_t b0, int64_t b1) {
                      std::vector<HostTensor> chunk(body.buffers.size());
                      for (int64_t c = b0; c < b1; ++c)
                        runChunk(chunk, c * kChunk);
                    });
  return results;
}

} // namespace step::rt::cpu
