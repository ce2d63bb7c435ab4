//===- FuseRowChains.cpp - step-fuse-row-chains: row reductions in turn ---===//
//
// step-fuse-row-chains merges row reductions that feed one another through
// broadcasts of their results, and the loop that consumes them all, into
// one `step.fusion "row_chain"` (dialects/step/Fusion.h, RowChain): one
// kernel takes each row through every reduction in turn, then stores the
// row's elements (docs/fusion.md, "row chains"). step-fuse cannot: a
// reduction whose result is broadcast back across the reduced dims ends
// its group. Layer norm's backward is such a chain: the mean of x, the
// variance of x - mean, the means of dy * gamma and of its product with
// xhat, then dx; after step-fuse it is a bare reduce_mean, two reduction
// fusions and a loop, each reading the [B, T, C] input again (GPT-2 124M
// at B = 8: four reads of 25 MB of f32 x and three of 12.6 MB of bf16 dy
// per layer norm, where the chain reads each once from DRAM).
//
// Guarantees: results are unchanged (the fusion's body holds clones of
// the very ops it replaces; the interpreter and the CPU backend run them
// op by op, and its kernel computes each value as the kernels it
// replaces); the merged body satisfies C7 (checked with the verifier's
// own analysis before a member joins); the block stays in SSA order (the
// fusion runs where the chain's last member ran; the ops between that
// read the chain's results, and their users, move after it, in order);
// the planned peak grows by at most kExtendBytes per merge (values that
// then die later, or column sums made earlier). Deterministic: chains in
// program order.
//
// Algorithm, per function's top-level block, in program order. A unit is
// a bare reduce_sum/mean/max over the trailing dims of its operand, a
// reduction fusion with reduce_* roots only whose body is a one-stage row
// chain (a stage unit), or a loop fusion (a tail). From each stage unit
// not yet merged, the ops after it are scanned: an op reading a result
// of the chain joins if it is a stage unit over the same shape and dims,
// or a tail with one element per element of that shape, reads no value
// of a tainted op, and the chain's body with it passes C7 (a trial
// fusion, erased again); a tail ends the chain. Any other op reading the
// chain or a tainted op is tainted (it must run after the fusion). The
// scan stops after kWindow ops or at a tail. A chain of two or more
// members becomes one fusion at its last member, yielding the members'
// results read outside it, its body cleaned by CSE (the loop and the
// reductions recompute the same centred x); the tainted ops before its
// last member move after it, refused when that keeps values alive longer
// (read there, dead before the fusion otherwise) of more than kExtendBytes
// in all, or when the fusion's own inputs would be kept so.
// Then, per row_chain fusion of the block in program order, a loop fusion
// making one of its inputs joins it (producerLoop: one element per element
// of its rows, every reader the chain or after it, C7, at most
// kExtendBytes kept alive longer unless the loop ran just before it; the
// chain computes the value and yields it: the residual add before a
// written-out layer norm, step-layer-norm-stats), repeated until none
// does; then column units join it (absorbColumns): of those within
// kWindow ops after it, then before it, the one whose operands the chain
// reads or makes in the most bytes (ties: the first found), that is a
// bare reduce_* over the leading dims of its operand
// or a reduction fusion yielding only such, reads one of the chain's
// inputs (after it: or its results), and with which the body passes C7
// (its column reductions: one row per reduced element) within
// kMaxColumnAccs register accumulators a lane; one after the chain reads
// only values made before it and has at most kExtendBytes of results
// (now made earlier), one before it has every user after the chain and at
// most kExtendBytes of operands the chain does not read (now kept alive
// until it). The merged fusion (CSE'd) replaces the chain where it ran;
// repeated until none joins. Layer norm's weight and bias gradients (the
// sums of dy * xhat and dy over the rows) so read x and dy in the chain's
// store pass instead of a kernel of their own, and the chain stops
// yielding mean and rstd for them.
// Cost: O(N * W) ops scanned for N ops, plus one trial fusion per member
// or column unit tried (O(B) for a body of B ops, with its C7 analysis)
// and CSE per merge.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMerge.h"
#include "passes/Passes.h"

#include "dialects/step/Fusion.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::step {
#define GEN_PASS_DEF_FUSEROWCHAINS
#include "passes/Passes.h.inc"

namespace {

/// Ops scanned after a chain's first member for the members to come.
constexpr int kWindow = 64;
/// Most members of one chain (layer norm's backward has four).
constexpr size_t kMaxMembers = 8;
/// The row kernel's limits (rowsFit).
constexpr int64_t kMaxCols = 65536, kMinRows = 128, kSmallDomain = 1 << 20;
/// Most bytes whose lifetime may grow by the merge.
constexpr int64_t kExtendBytes = 64 * 1024;

/// Column reductions join a chain (of rows of at most 1024 elements, C7:
/// a warp a row, lane l adding columns l, l + 32, ...) while each lane
/// has at most kMaxColumnAccs column accumulators (two reductions of 768
/// columns: 48), which the kernel keeps in shared memory: 48 KiB for 8
/// warps of 4-byte sums (RowChainKernels.cpp; C7's own cap is 96 KiB).
constexpr int64_t kMaxColumnAccs = 48;

/// Whether `op` is a column unit: a bare reduce_* over the leading dims
/// of its operand (not all of them), or a reduction fusion yielding only
/// such reductions' results.
bool isColumnReduce(Operation *op) {
  return op && fusionRole(op) == FusionRole::Reduce && reducesLeadingDims(op);
}
bool isColumnUnit(Operation *op) {
  if (isColumnReduce(op))
    return true;
  auto f = dyn_cast<FusionOp>(op);
  return f && f.getKind() == kReductionFusion && f.getNumResults() > 0 &&
         llvm::all_of(f.getYield()->getOperands(), [](Value y) {
           return isColumnReduce(y.getDefiningOp());
         });
}

/// What a unit contributes to a chain.
struct Unit {
  bool tail = false;           ///< a loop fusion
  SmallVector<int64_t> domain; ///< a stage's reduced operand shape
  int64_t lead = 0, numel = 0; ///< a stage's row dims; elements
};

/// Whether a stage's rows suit the row kernel, which gives each row one
/// warp or block: rows of fewer than kMaxCols elements (from there on a
/// reduce kernel may split a row over blocks, an order of summation the
/// chain would not keep), and enough of them to fill the GPU unless the
/// whole domain is small. (A full reduction feeding its own broadcast is
/// one row: a split reduction's work.)
bool rowsFit(const Unit &u) {
  int64_t cols = 1;
  for (size_t d = u.lead; d < u.domain.size(); ++d)
    cols *= u.domain[d];
  int64_t rows = cols ? u.numel / cols : 0;
  return cols < kMaxCols && (rows >= kMinRows || u.numel <= kSmallDomain);
}

std::optional<Unit> unitOf(Operation *op) {
  Unit u;
  if (fusionRole(op) == FusionRole::Reduce) {
    auto in = cast<RankedTensorType>(op->getOperand(0).getType());
    std::optional<int64_t> lead = trailingLead(op);
    if (!lead || !in.hasStaticShape())
      return std::nullopt;
    u.domain.assign(in.getShape().begin(), in.getShape().end());
    u.lead = *lead;
    u.numel = in.getNumElements();
    return rowsFit(u) ? std::optional<Unit>(u) : std::nullopt;
  }
  auto f = dyn_cast<FusionOp>(op);
  if (!f)
    return std::nullopt;
  if (f.getKind() == kLoopFusion && f.getNumResults() > 0) {
    auto t = dyn_cast<RankedTensorType>(f.getResult(0).getType());
    if (!t || !t.hasStaticShape())
      return std::nullopt;
    u.tail = true;
    u.numel = t.getNumElements();
    return u;
  }
  if (f.getKind() != kReductionFusion)
    return std::nullopt;
  // C7 refuses row ops, so a reduction fusion around one is no unit.
  std::string why;
  std::optional<RowChain> rc = analyzeRowChain(f.getBlock(), why);
  if (!rc || rc->stages.size() != 1)
    return std::nullopt;
  u.domain = rc->domain;
  u.lead = rc->lead;
  u.numel = rc->rows * rc->cols;
  return rowsFit(u) ? std::optional<Unit>(u) : std::nullopt;
}

/// The row chain of `members` merged at `at` (a trial fusion, erased
/// again); std::nullopt when the body breaks C7.
std::optional<RowChain> trialChain(ArrayRef<Operation *> members,
                                   Operation *at) {
  FusionOp trial =
      mergeUnits(members, at, kRowChainFusion, [](Value) { return true; });
  std::string why;
  std::optional<RowChain> rc = analyzeRowChain(trial.getBlock(), why);
  trial->erase();
  return rc;
}

/// `bytes` + the bytes of `type`, saturating (staticBytes gives INT64_MAX
/// for a dynamic shape).
int64_t addBytes(int64_t bytes, Type type) {
  int64_t b = staticBytes(type);
  return b > INT64_MAX - bytes ? INT64_MAX : bytes + b;
}

class ChainFuser {
public:
  explicit ChainFuser(Block &block) : block_(block) {}

  void run() {
    SmallVector<Operation *> ops;
    for (Operation &op : block_)
      ops.push_back(&op);
    for (Operation *op : ops)
      if (!merged_.contains(op))
        tryChainFrom(op);
  }

  /// The second sweep: column reductions (layer norm's weight and bias
  /// gradients, bias gradients) that read a chain's values join it.
  void absorbColumns() {
    SmallVector<FusionOp> chains;
    for (auto f : block_.getOps<FusionOp>())
      if (f.getKind() == kRowChainFusion)
        chains.push_back(f);
    for (FusionOp f : chains) {
      while (Operation *l = producerLoop(f))
        f = fuseUnits({l, f.getOperation()}, f, kRowChainFusion);
      while (Operation *u = nextColumnUnit(f)) {
        SmallVector<Operation *> members{f.getOperation(), u};
        if (u->isBeforeInBlock(f))
          std::swap(members[0], members[1]);
        f = fuseUnits(members, f, kRowChainFusion);
      }
    }
  }

private:
  void tryChainFrom(Operation *first) {
    std::optional<Unit> head = unitOf(first);
    if (!head || head->tail)
      return;
    SmallVector<Operation *> members{first};
    llvm::DenseSet<Value> chainValues(first->result_begin(),
                                      first->result_end());
    llvm::SetVector<Operation *> tainted;
    llvm::DenseSet<Value> taintedValues;
    int scanned = 0;
    for (Operation *op = first->getNextNode();
         op && scanned < kWindow && members.size() < kMaxMembers;
         op = op->getNextNode(), ++scanned) {
      bool readsChain = false, readsTainted = false;
      for (Value v : op->getOperands()) {
        readsChain |= chainValues.contains(v);
        readsTainted |= taintedValues.contains(v);
      }
      if (!readsChain && !readsTainted)
        continue;
      std::optional<Unit> u = readsTainted ? std::nullopt : unitOf(op);
      bool fits =
          u && (u->tail ? u->numel == head->numel
                        : u->domain == head->domain && u->lead == head->lead);
      if (fits) {
        members.push_back(op);
        fits = trialChain(members, members.back()).has_value();
        if (!fits)
          members.pop_back();
      }
      if (!fits) {
        tainted.insert(op);
        taintedValues.insert(op->result_begin(), op->result_end());
        continue;
      }
      chainValues.insert(op->result_begin(), op->result_end());
      if (u->tail)
        break;
    }
    if (members.size() < 2)
      return;
    Operation *last = members.back();
    SmallVector<Operation *> moved;
    for (Operation *t : tainted)
      if (t->isBeforeInBlock(last))
        moved.push_back(t);
    if (extendedBytes(members, moved) > kExtendBytes)
      return;

    merged_.insert(members.begin(), members.end());
    Operation *after = fuseUnits(members, last, kRowChainFusion);
    for (Operation *t : moved) {
      t->moveAfter(after);
      after = t;
    }
  }

  /// Bytes of the values whose last reader moves later: the moved ops'
  /// operands and the chain's inputs that every other reader reads before
  /// the last member (made by an op: arguments live for the whole step).
  int64_t extendedBytes(ArrayRef<Operation *> members,
                        ArrayRef<Operation *> moved) {
    Operation *last = members.back();
    llvm::SmallPtrSet<Operation *, 16> late(moved.begin(), moved.end());
    late.insert(members.begin(), members.end());
    llvm::DenseSet<Value> seen;
    int64_t bytes = 0;
    auto check = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || late.contains(def) || !seen.insert(v).second)
        return;
      bool diesBefore = llvm::all_of(v.getUsers(), [&](Operation *user) {
        Operation *a = block_.findAncestorOpInBlock(*user);
        return a && (late.contains(a) ? a != last : a->isBeforeInBlock(last));
      });
      // Read by the last member itself: alive at the fusion anyway.
      bool readAtLast = llvm::is_contained(last->getOperands(), v);
      if (diesBefore && !readAtLast)
        bytes = addBytes(bytes, v.getType());
    };
    for (Operation *op : moved)
      for (Value v : op->getOperands())
        check(v);
    for (Operation *m : members)
      if (m != last)
        for (Value v : m->getOperands())
          check(v);
    return bytes;
  }

  /// A loop fusion that makes one of chain `f`'s inputs, one element per
  /// element of f's rows (a residual add before a layer norm), whose
  /// results are read only by f and after it, and with which f's body
  /// passes C7 within kExtendBytes of longer-lived values (any, when the
  /// loop runs just before f): the merged chain
  /// computes the value from the loop's inputs in each pass and stores it
  /// for the later readers, rather than the loop storing it and the chain
  /// reading it back.
  Operation *producerLoop(FusionOp f) {
    std::string why;
    std::optional<RowChain> own = analyzeRowChain(f.getBlock(), why);
    if (!own)
      return nullptr;
    for (Value v : f.getInputs()) {
      auto l = v.getDefiningOp<FusionOp>();
      if (!l || l->getBlock() != &block_ || l.getKind() != kLoopFusion)
        continue;
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || !t.hasStaticShape() ||
          t.getNumElements() != own->rows * own->cols)
        continue;
      bool later = llvm::all_of(l->getUsers(), [&](Operation *user) {
        Operation *a = block_.findAncestorOpInBlock(*user);
        return a && (a == f.getOperation() || f->isBeforeInBlock(a));
      });
      // Values the loop reads last live on to f: no matter when nothing
      // runs in between.
      bool adjacent = l->getNextNode() == f.getOperation();
      if (!later || !trialChain({l.getOperation(), f.getOperation()}, f) ||
          (!adjacent &&
           extendedBytes({l.getOperation(), f.getOperation()}, {}) >
               kExtendBytes))
        continue;
      return l;
    }
    return nullptr;
  }

  /// Of the ops within kWindow after chain `f` and then before it that
  /// may join it as column reductions, the one that saves the most bytes
  /// of reads (its operands that f reads or makes; the nearest after f,
  /// then before, on a tie) (the merged fusion runs where f
  /// ran): a column unit reading one of f's inputs (or, after f, its
  /// results) and with which f's body passes C7 within the column
  /// accumulator budget. One after f must read only values made before f
  /// (or f's), and have at most kExtendBytes of results (made that much
  /// earlier); one before f must have every user after f, and at most
  /// kExtendBytes of operands that f does not read (kept alive until f).
  Operation *nextColumnUnit(FusionOp f) {
    auto fits = [&](Operation *op) {
      std::optional<RowChain> rc = trialChain({f.getOperation(), op}, f);
      return rc && static_cast<int64_t>(rc->columns.size()) *
                           ((rc->cols + 31) / 32) <=
                       kMaxColumnAccs;
    };
    // Of the candidates, the one whose operands the chain reads or makes
    // in the most bytes (reads saved); the first found on a tie.
    Operation *best = nullptr;
    int64_t bestSaved = -1;
    auto consider = [&](Operation *op) {
      int64_t saved = 0;
      llvm::SmallPtrSet<Value, 4> seen;
      for (Value v : op->getOperands())
        if (seen.insert(v).second &&
            (v.getDefiningOp() == f.getOperation() ||
             llvm::is_contained(f.getInputs(), v)))
          saved = addBytes(saved, v.getType());
      if (saved > bestSaved && fits(op)) {
        best = op;
        bestSaved = saved;
      }
    };
    int scanned = 0;
    for (Operation *op = f->getNextNode(); op && scanned < kWindow;
         op = op->getNextNode(), ++scanned) {
      if (!isColumnUnit(op))
        continue;
      bool shares = false, before = true;
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        shares |=
            def == f.getOperation() || llvm::is_contained(f.getInputs(), v);
        before &= def == f.getOperation() || !def ||
                  (def->getBlock() == &block_ && def->isBeforeInBlock(f));
      }
      int64_t bytes = 0;
      for (Value r : op->getResults())
        bytes = addBytes(bytes, r.getType());
      if (shares && before && bytes <= kExtendBytes)
        consider(op);
    }
    scanned = 0;
    for (Operation *op = f->getPrevNode(); op && scanned < kWindow;
         op = op->getPrevNode(), ++scanned) {
      if (!isColumnUnit(op))
        continue;
      bool shares = false, usedAfter = true;
      int64_t bytes = 0;
      for (Value v : op->getOperands()) {
        bool read = llvm::is_contained(f.getInputs(), v);
        shares |= read;
        if (!read)
          bytes = addBytes(bytes, v.getType());
      }
      for (Operation *user : op->getUsers()) {
        Operation *a = block_.findAncestorOpInBlock(*user);
        usedAfter &= a && f->isBeforeInBlock(a);
      }
      if (shares && usedAfter && bytes <= kExtendBytes)
        consider(op);
    }
    return best;
  }

  Block &block_;
  /// Members merged (erased): run()'s list of the block's ops skips them.
  llvm::SmallPtrSet<Operation *, 16> merged_;
};

struct FuseRowChainsPass : impl::FuseRowChainsBase<FuseRowChainsPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal()) {
        ChainFuser fuser(f.getBody().front());
        fuser.run();
        fuser.absorbColumns();
      }
  }
};

} // namespace
} // namespace mlir::step
