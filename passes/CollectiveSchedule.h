//===- CollectiveSchedule.h - Where step-shard's collectives go -*- C++ -*-===//
//
// The scheduling step-shard (Shard.cpp) applies to the collectives it has
// inserted, once @train_step is inlined: gradient collectives merged into
// buckets (as DDP's), and ZeRO-3's parameter gathers issued one layer ahead
// of their use (as DeepSpeed's prefetch). Both only move, merge or drop
// collectives and the reshapes/slices around them; values are unchanged.
// Cost: O(C log C) for C collectives plus the ops they create.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_COLLECTIVESCHEDULE_H
#define STEP_PASSES_COLLECTIVESCHEDULE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::step {

/// The replicas a collective spans: their number and the attributes the
/// collective ops carry (group size, the ranks of the groups).
struct CollectiveGroup {
  int64_t size;
  IntegerAttr sizeAttr;
  DenseI64ArrayAttr groupsAttr;
};

/// Merges the collectives of gradients that become ready one after the
/// other into buckets of about `bucketBytes` (DDP's gradient buckets):
/// one collective per bucket, placed where its last gradient's was.
/// all_reduce: the flat gradients concatenated, reduced, sliced apart.
/// reduce_scatter: each padded gradient viewed as [N, S_i] and
/// concatenated along dim 1, so block r of the bucket holds block r of
/// every gradient; sliced apart after the scatter.
/// `chains`: per gradient, the ops from its value to its collective (a mean
/// all_reduce or reduce_scatter over `group`), the collective last; the
/// merged collectives are erased (their chains are not updated).
void bucketGradientCollectives(MutableArrayRef<SmallVector<Operation *>> chains,
                               const CollectiveGroup &group,
                               int64_t bucketBytes);

/// A zero3 gather re-issued before one use: the param's layer
/// (layerOfParam), the op that reads the full param, and the cloned gather
/// ops (the gathered value is the last one's result).
struct LayerGather {
  std::string unit;
  Operation *user;
  SmallVector<Operation *> chain;
};

/// The layer a param belongs to, from its name: up to its first
/// all-digit component ("h.3.attn.c_attn.weight" -> "h.3", as a
/// transformer block), else its module ("fc1.weight" -> "fc1"), else
/// the name itself ("wte").
std::string layerOfParam(StringRef name);

/// Prefetching one layer ahead. In program order the gathers form
/// visits: maximal runs of gathers of one layer (the forward visits
/// the layers in order, the backward in reverse, a tied embedding
/// twice; the last layer's forward and backward make one visit). Visit
/// i's gathers all move to right before the first use of visit i - 1
/// (visit 0's before its own first use), in program order, so the
/// collectives, which run in order, are issued one layer before their
/// layer computes and overlap the layer before it; a param's second
/// gather in one visit reuses the first. Cost: a full layer more of
/// params live at a time (two instead of one), as ZeRO-3's prefetch.
void prefetchLayers(MutableArrayRef<LayerGather> gathers);

} // namespace mlir::step

#endif // STEP_PASSES_COLLECTIVESCHEDULE_H
