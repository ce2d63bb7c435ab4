//===- CollectiveSchedule.cpp - Where step-shard's collectives go ---------===//

#include "passes/CollectiveSchedule.h"

#include "passes/Activations.h"

#include "dialects/step/StepOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::step {

/// One collective for the gradients of `bucket` (chains in ready order),
/// placed after the last one's; the bucket's collectives are erased.
static void mergeBucket(ArrayRef<SmallVector<Operation *> *> bucket,
                        const CollectiveGroup &group) {
  int64_t n = group.size;
  Operation *last = bucket.back()->back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  Location loc = last->getLoc();
  bool scatter = isa<ReduceScatterOp>(last);
  SmallVector<Value> parts;
  SmallVector<int64_t> widths;
  for (auto *chain : bucket) {
    Operation *collective = chain->back();
    Value in = collective->getOperand(0); // flat (and padded)
    auto t = cast<RankedTensorType>(in.getType());
    if (t.getRank() != 1) {
      in = b.create<ReshapeOp>(
          loc, RankedTensorType::get({t.getNumElements()}, t.getElementType()),
          in);
      t = cast<RankedTensorType>(in.getType());
    }
    int64_t width = scatter ? t.getDimSize(0) / n : t.getDimSize(0);
    if (scatter)
      in = b.create<ReshapeOp>(
          loc, RankedTensorType::get({n, width}, t.getElementType()), in);
    parts.push_back(in);
    widths.push_back(width);
  }
  Value joined = b.create<ConcatOp>(loc, parts, scatter ? 1 : 0);
  auto jt = cast<RankedTensorType>(joined.getType());
  Value reduced;
  auto mean = b.getStringAttr("mean");
  if (scatter) {
    Value flat = b.create<ReshapeOp>(
        loc, RankedTensorType::get({jt.getNumElements()}, jt.getElementType()),
        joined);
    reduced = b.create<ReduceScatterOp>(loc, flat, mean, group.sizeAttr,
                                        group.groupsAttr);
  } else {
    reduced = b.create<AllReduceOp>(loc, joined, mean, group.sizeAttr,
                                    group.groupsAttr);
  }
  int64_t offset = 0;
  for (auto [chain, width] : llvm::zip(bucket, widths)) {
    Operation *collective = chain->back();
    Value piece = b.create<SliceOp>(
        loc, reduced, b.getDenseI64ArrayAttr({offset}),
        b.getDenseI64ArrayAttr({offset + width}), b.getDenseI64ArrayAttr({1}));
    offset += width;
    Type want = collective->getResult(0).getType();
    if (piece.getType() != want)
      piece = b.create<ReshapeOp>(loc, want, piece);
    collective->getResult(0).replaceAllUsesWith(piece);
    collective->erase();
  }
}

void bucketGradientCollectives(MutableArrayRef<SmallVector<Operation *>> chains,
                               const CollectiveGroup &group,
                               int64_t bucketBytes) {
  SmallVector<SmallVector<Operation *> *> ready;
  for (auto &chain : chains)
    ready.push_back(&chain);
  llvm::sort(ready, [](auto *a, auto *b) {
    return a->back()->isBeforeInBlock(b->back());
  });
  // One open bucket per element type (a concat needs one type).
  llvm::MapVector<Type,
                  std::pair<SmallVector<SmallVector<Operation *> *>, int64_t>>
      open;
  for (auto *chain : ready) {
    Value grad = chain->front()->getOperand(0);
    auto &[bucket, bytes] =
        open[cast<RankedTensorType>(grad.getType()).getElementType()];
    bucket.push_back(chain);
    bytes += tensorBytes(grad.getType());
    if (bytes >= bucketBytes) {
      if (bucket.size() > 1)
        mergeBucket(bucket, group);
      bucket.clear();
      bytes = 0;
    }
  }
  for (auto &entry : open)
    if (entry.second.first.size() > 1)
      mergeBucket(entry.second.first, group);
}

std::string layerOfParam(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].empty() &&
        parts[i].find_first_not_of("0123456789") == StringRef::npos)
      return llvm::join(ArrayRef(parts).take_front(i + 1), ".");
  return parts.size() > 1 ? llvm::join(ArrayRef(parts).drop_back(), ".")
                          : name.str();
}

void prefetchLayers(MutableArrayRef<LayerGather> gathers) {
  llvm::sort(gathers, [](const LayerGather &a, const LayerGather &b) {
    return a.chain.front()->isBeforeInBlock(b.chain.front());
  });
  SmallVector<Operation *> visitStart; // each visit's first use
  SmallVector<size_t> visitOf;
  for (size_t i = 0; i < gathers.size(); ++i) {
    if (i == 0 || gathers[i].unit != gathers[i - 1].unit)
      visitStart.push_back(gathers[i].user);
    visitOf.push_back(visitStart.size() - 1);
  }
  // A param gathered twice in one visit (the last layer's, read by the
  // forward and then by the backward) is gathered once.
  DenseMap<std::pair<size_t, Value>, Operation *> first;
  for (size_t i = 0; i < gathers.size(); ++i) {
    ArrayRef<Operation *> chain = gathers[i].chain;
    auto [it, fresh] = first.try_emplace(
        {visitOf[i], chain.front()->getOperand(0)}, chain.back());
    if (!fresh) {
      chain.back()->getResult(0).replaceAllUsesWith(it->second->getResult(0));
      for (Operation *op : llvm::reverse(chain))
        op->erase();
      continue;
    }
    Operation *at = visitStart[visitOf[i] == 0 ? 0 : visitOf[i] - 1];
    for (Operation *op : chain)
      op->moveBefore(at);
  }
}

} // namespace mlir::step
