//===- Fuse.cpp - step-fuse: group ops into step.fusion kernels -----------===//
//
// step-fuse outlines groups of ops of every function's top-level block into
// `step.fusion` ops; codegen emits one kernel per fusion. docs/fusion.md
// ("The pass") gives each rule's reason and measurements.
//
// Guarantees: results are unchanged (a fusion's body holds the very ops it
// replaces, and the interpreter and the CPU backend run them op by op);
// every group respects the contract of its kind (dialects/step/Fusion.h,
// the step.fusion verifier); the outlined IR is valid SSA (a group is
// outlined only where every input is defined before the fusion and every
// outside user comes after it); the result is deterministic (groups are
// formed and outlined in program order).
//
// Algorithm. Elementwise/view ops first sink to their first user where
// that lengthens no live bytes. Then five phases over the block in program
// order (an op joins at most one group):
//  1. matmul: matmul -> bias add -> relu/tanh-GELU, each the single user of
//     the one before, become one cuBLASLt call with an epilogue. With
//     `gelu-epilogues`, also a tanh-GELU whose input is read later (the
//     input is yielded: GELU_AUX), and matmul -> gelu_grad of its product
//     -> the sum of that over the leading dims (DGELU_BGRAD).
//  2. multi_tensor: optimizer updates of one op and attribute set (not
//     LAMB: it needs per-tensor norms first) with their operands'
//     prologues, chunked by `max-tensors` and 3 KB of kernel pointers; and
//     the gradient norm's full reduce_sums added into one running total,
//     with their `g * g` prologues and scalar epilogue.
//  3. reduction: each reduce_* (with `row-ops`, also softmax, log_softmax,
//     layer_norm, cross_entropy[_grad]) is a root; later reductions of the
//     same input shape and dims sharing a producer are sibling roots;
//     producers join as the prologue, consumers of the results' size as the
//     epilogue. Under a row op whose result has its input's size, a
//     prologue value also read later joins and is yielded (the residual add
//     before a layer_norm).
//  4. loop: from each remaining elementwise op, last first, producers of
//     its element count join, yielded when read after the group, pads too.
//  5. multi_tensor: float casts of arguments left in no group (AMP's bf16
//     parameter copies), by first use, chunked as in 2, at most 16 MB of
//     copies made early per fusion.
// A producer joins only if all its users are in the group (phases 3 and 4
// also admit users after it). Cost rule (FuseCost.h): a producer of another
// element count than the group's domain is evaluated once per broadcast
// element, so only cheap elementwise ops (isCheapElementwise) and views
// join; views, casts of the domain's size and recomputable ops are copied
// into each group that reads them rather than stored, and die when every
// user holds a copy. A fusion holds at most `max-ops` ops and `max-inputs`
// inputs (a register proxy); single-op groups stay unfused; a reshape or
// stop_gradient of a group value read only after it moves out, a view of
// the fusion's result. Refused by construction: ops across a matmul or any
// op of role None, a reduction feeding a broadcast across the reduced dim,
// a group whose outlining would break SSA order.
//
// Cost, for V ops: positions are numbered once and kept through the
// sinking's moves and the outlining's edits (BlockOrder.h), so an edit
// costs its own ops and users, not a renumbering of the block. Growing a
// group walks the producers it reaches by priority, O(k log k) for k of
// them. A reduction root is compared only with the later reductions
// whose operands lie within three elementwise/view levels of its own
// (FuseSiblings.h: an index of those "balls" built once, a few values
// each for R reductions; O(R^2) pairs at worst, when one value is near all of
// them); a comparison walks a cone of at most three levels, and the
// dependence check walks back no further than the root. GPT-2's bf16
// training step, 2-core machine: 124M 7 ms, 24-layer 350M 11 ms (14 and
// 48 ms when the block was renumbered per outlined group and a root's
// siblings were looked for over the rest of the block).
//
//===----------------------------------------------------------------------===//

#include "passes/BlockOrder.h"
#include "passes/FuseCost.h"
#include "passes/FuseMatmul.h"
#include "passes/FuseSiblings.h"
#include "passes/FusionMerge.h"
#include "passes/Passes.h"

#include "dialects/step/Fusion.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <queue>

namespace mlir::step {
#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"

namespace {

struct Group {
  std::string kind;
  llvm::SetVector<Operation *> ops;  ///< moved into the fusion
  llvm::SetVector<Operation *> dups; ///< views cloned into it, kept outside
  bool contains(Operation *op) const {
    return ops.contains(op) || dups.contains(op);
  }
};

class Fuser {
public:
  Fuser(func::FuncOp f, const FuseOptions &o)
      : block(f.getBody().front()), options(o), pos(block) {}

  void run() {
    sinkCheapOps(block);
    pos.renumber();
    if (options.epilogues)
      formMatmulGroups();
    if (options.multiTensor) {
      formUpdateGroups();
      formNormGroups();
    }
    formReductionGroups();
    formLoopGroups();
    if (options.multiTensor)
      formCastGroups();
    outlineAll();
  }

private:
  Block &block;
  const FuseOptions &options;
  BlockOrder pos; ///< kept through the outlining's edits
  llvm::DenseSet<Operation *> taken; ///< members of some group
  /// The group (index into `groups`) of each member, and the groups that
  /// hold a copy (Group::dups) of each copied op.
  llvm::DenseMap<Operation *, unsigned> memberOf;
  llvm::DenseMap<Operation *, SmallVector<unsigned, 2>> copiedInto;
  /// Values the group being grown must read as inputs (a row op's
  /// non-row operands).
  llvm::DenseSet<Value> inputsOnly;
  std::vector<Group> groups;

  bool isFree(Operation *op) {
    return op && op->getBlock() == &block && !taken.contains(op);
  }
  /// Whether every user of `op` moves into the fusion (a duplicated view's
  /// original stays outside, so it does not count).
  static bool usersIn(Operation *op, const Group &g) {
    return llvm::all_of(op->getUsers(),
                        [&](Operation *u) { return g.ops.contains(u); });
  }
  /// Distinct values read by `g` from outside it.
  static int64_t countInputs(const Group &g) {
    llvm::SetVector<Value> in;
    for (const auto *set : {&g.ops, &g.dups})
      for (Operation *op : *set)
        for (Value v : op->getOperands())
          if (!v.getDefiningOp() || !g.contains(v.getDefiningOp()))
            in.insert(v);
    return static_cast<int64_t>(in.size());
  }
  bool fits(const Group &g) {
    return static_cast<int64_t>(g.ops.size() + g.dups.size()) <=
               options.maxOps &&
           countInputs(g) <= options.maxInputs;
  }
  void commit(Group g) {
    unsigned index = groups.size();
    for (Operation *op : g.ops) {
      taken.insert(op);
      memberOf[op] = index;
    }
    for (Operation *d : g.dups)
      copiedInto[d].push_back(index);
    groups.push_back(std::move(g));
  }

  /// Whether every user of `op` reads a copy of it: a member of a group
  /// that holds a copy, or an op in no group that itself dies so, every
  /// group holding a copy of it holding one of `op` too (a chain of
  /// recomputed ops: layer norm's centred x, read only by its scaled
  /// copies). Then `op` dies at outlining and must not become a loop
  /// fusion of its own. `depth` bounds the walk along such chains.
  bool copiedIntoEveryUser(Operation *op, int depth = 4) {
    auto it = copiedInto.find(op);
    if (it == copiedInto.end())
      return false;
    auto holds = [&](unsigned g) { return llvm::is_contained(it->second, g); };
    return llvm::all_of(op->getUsers(), [&](Operation *u) {
      if (auto m = memberOf.find(u); m != memberOf.end())
        return holds(m->second);
      auto c = copiedInto.find(u);
      return depth > 0 && c != copiedInto.end() &&
             llvm::all_of(c->second, holds) &&
             copiedIntoEveryUser(u, depth - 1);
    });
  }

  /// Adds the producers of `seeds` to `g` (see the header for who may
  /// join). `domain`: the group's element count. `outsideAfter` >= 0 also
  /// admits producers of the domain's size whose outside users all come
  /// after that position (they become results of the fusion).
  void growProducers(Group &g, ValueRange seeds, int64_t domain,
                     int64_t outsideAfter = -1, bool budget = true,
                     bool pads = false) {
    auto later = [&](Operation *a, Operation *b) {
      return pos[a] < pos[b];
    };
    std::priority_queue<Operation *, std::vector<Operation *>, decltype(later)>
        work(later);
    llvm::DenseSet<Operation *> queued;
    auto push = [&](Value v) {
      Operation *d = v.getDefiningOp();
      if (isFree(d) && !g.contains(d) && !inputsOnly.contains(v) &&
          queued.insert(d).second)
        work.push(d);
    };
    for (Value v : seeds)
      push(v);
    while (!work.empty()) {
      Operation *p = work.top();
      work.pop();
      if (!(isEltOrView(p) || (pads && isa<PadOp>(p))) ||
          p->getNumResults() != 1)
        continue;
      bool sameDomain = numElements(p->getResult(0)) == domain;
      if (!sameDomain && !isCheapElementwise(p) &&
          fusionRole(p) != FusionRole::View)
        continue; // would be recomputed per broadcast element
      bool inside = usersIn(p, g);
      bool dup = false;
      if (!inside) {
        bool afterOk = outsideAfter >= 0 && sameDomain;
        for (Operation *u : p->getUsers())
          if (!g.ops.contains(u) &&
              pos[block.findAncestorOpInBlock(*u)] <= outsideAfter)
            afterOk = false;
        // Views, casts of the group's size and recomputable ops of that
        // size are copied in (FuseCost.h); the last not where the group
        // may yield it (a later user, a matmul say, reads it anyway).
        dup = (copiedIntoFusions(p) &&
               (fusionRole(p) == FusionRole::View || sameDomain)) ||
              (sameDomain && recomputableInFusions(p) && !afterOk);
        if (!afterOk && !dup)
          continue;
      }
      (dup ? g.dups : g.ops).insert(p);
      if (budget && !fits(g)) {
        (dup ? g.dups : g.ops).remove(p);
        continue;
      }
      for (Value v : p->getOperands())
        push(v);
    }
  }

  //===--------------------------------------------------------------------===//
  // Phase 1: matmul epilogues
  //===--------------------------------------------------------------------===//

  void formMatmulGroups() {
    mlir::step::formMatmulGroups(
        block, options.geluEpilogues, [&](Operation *op) { return isFree(op); },
        [&](MatmulGroup m) {
          Group g;
          g.kind = kMatmulFusion;
          g.ops = std::move(m.ops);
          g.dups = std::move(m.dups);
          commit(std::move(g));
        });
  }

  //===--------------------------------------------------------------------===//
  // Phase 2: multi-tensor updates and gradient-norm reductions
  //===--------------------------------------------------------------------===//

  void formUpdateGroups() {
    // Buckets of updates with the same op and attributes, in program order.
    llvm::MapVector<std::pair<OperationName, DictionaryAttr>,
                    std::vector<Operation *>>
        buckets;
    for (Operation &op : block)
      // LAMB needs each tensor's norms before its update: not one pass.
      if (fusionRole(&op) == FusionRole::Update && isFree(&op) &&
          !isa<LambUpdateOp>(op))
        buckets[{op.getName(), op.getAttrDictionary()}].push_back(&op);
    for (auto &bucket : buckets) {
      // Named, not a structured binding: the lambda below captures it.
      std::vector<Operation *> &updates = bucket.second;
      if (updates.size() < 2)
        continue;
      // Each update with its prologue.
      commitChunks(updates.size(), [&](Group &g, size_t i, size_t) {
        addUpdate(g, updates[i]);
        return true;
      });
    }
  }

  static constexpr int64_t kParamBytes = 3072;

  /// Commits multi_tensor groups of consecutive items 0..n-1: each chunk of
  /// at most max-tensors items whose pointer parameters (8 bytes per
  /// distinct input and per result) stay within kParamBytes of the 4 KB
  /// kernel-parameter space; `add(g, i, first)` adds item i to a chunk
  /// that began at item `first` and says whether it may stay (the first of
  /// a chunk always does). Chunks of one item stay unfused.
  template <class Add> void commitChunks(size_t n, Add add) {
    for (size_t at = 0; at < n;) {
      Group g;
      g.kind = kMultiTensorFusion;
      size_t end = at;
      for (; end < n && static_cast<int64_t>(end - at) < options.maxTensors;
           ++end) {
        Group grown = g;
        bool ok = add(grown, end, at);
        if (end > at && (!ok || paramBytes(grown) > kParamBytes))
          break;
        g = std::move(grown);
      }
      if (g.ops.size() > 1)
        commit(std::move(g));
      at = end;
    }
  }

  /// Casts of the function's arguments still in no group and read as
  /// stored values by some user (AMP's bf16 copies of the f32 parameters
  /// for the matmuls): multi_tensor fusions of up to max-tensors of them
  /// and 3 KB of pointers, taken in the order of their first uses; each is
  /// outlined before the first use of any of its casts, so a cast whose
  /// own first use comes later is made earlier: at most kCastExtendBytes
  /// of such copies per fusion (GPT-2 124M: about a layer's weights).
  void formCastGroups() {
    struct Cast {
      Operation *op;
      int64_t firstUse, bytes;
    };
    std::vector<Cast> casts;
    for (Operation &op : block) {
      auto c = dyn_cast<CastOp>(op);
      if (!c || !isFree(c) || !isa<BlockArgument>(c.getOperand()) ||
          c.getType().getRank() == 0 ||
          !isa<FloatType>(c.getType().getElementType()) ||
          !isa<FloatType>(c.getOperand().getType().getElementType()) ||
          c.getType().getElementType() ==
              c.getOperand().getType().getElementType() ||
          copiedIntoEveryUser(c))
        continue;
      int64_t first = INT64_MAX;
      for (Operation *u : c->getUsers())
        first = std::min(first, pos[block.findAncestorOpInBlock(*u)]);
      casts.push_back({c, first, staticBytes(c.getType())});
    }
    llvm::stable_sort(casts, [](const Cast &a, const Cast &b) {
      return a.firstUse < b.firstUse;
    });
    // A chunk's copies made before their own first use: those of the
    // casts after its first whose first use is later.
    int64_t extended = 0;
    commitChunks(casts.size(), [&](Group &g, size_t i, size_t first) {
      g.ops.insert(casts[i].op);
      if (i == first)
        extended = 0;
      if (casts[i].firstUse > casts[first].firstUse)
        extended += casts[i].bytes;
      return extended <= kCastExtendBytes;
    });
  }
  static constexpr int64_t kCastExtendBytes = 16 << 20;

  /// Adds update `u` and the prologue of its tensor operands to `g`.
  void addUpdate(Group &g, Operation *u) {
    g.ops.insert(u);
    SmallVector<Value> tensors;
    for (Value v : u->getOperands())
      if (cast<RankedTensorType>(v.getType()).getRank() > 0)
        tensors.push_back(v);
    growProducers(g, tensors, numElements(u->getOperand(0)), -1,
                  /*budget=*/false);
  }

  /// Kernel pointer bytes of a multi_tensor group: its distinct inputs and
  /// the results of its roots (updates or the norm's epilogue).
  static int64_t paramBytes(const Group &g) {
    int64_t results = 0;
    for (Operation *op : g.ops)
      if (fusionRole(op) == FusionRole::Update || isa<CastOp>(op))
        results += op->getNumResults();
    return 8 * (countInputs(g) + results);
  }

  /// Whether `v` can be an input (or a duplicated view's operand) of a
  /// group whose first root is at position `p`: a block argument or an op
  /// before p outside `g`, or a free elementwise/view op of such values
  /// (depth-limited).
  bool availableBefore(Value v, int64_t p, const Group &g, int depth = 2) {
    Operation *d = v.getDefiningOp();
    if (d && g.contains(d))
      return false;
    if (!d || pos[d] < p)
      return true;
    if (depth == 0 || !isFree(d) || !isEltOrView(d))
      return false;
    return llvm::all_of(d->getOperands(), [&](Value o) {
      return availableBefore(o, p, g, depth - 1);
    });
  }

  /// The last op of the running total a full sum is added into: single-use
  /// rank-0 adds followed from `r` (nullptr when `r` feeds no such add).
  Operation *totalOf(Operation *r) {
    Value v = r->getResult(0);
    Operation *end = nullptr;
    while (v.hasOneUse()) {
      auto add = dyn_cast<AddOp>(*v.getUsers().begin());
      if (!add || !isFree(add) || add.getType().getRank() != 0)
        break;
      end = add;
      v = add.getResult();
    }
    return end;
  }

  /// The clip's global norm: float full sums added into one running total
  /// (sum over params of sum(g * g)), with their prologues and the scalar
  /// epilogue; a sum that depends on another stays out.
  void formNormGroups() {
    llvm::MapVector<Operation *, std::vector<Operation *>> totals;
    for (Operation &op : block) {
      auto r = dyn_cast<ReduceSumOp>(op);
      if (!r || !isFree(r) || r.getType().getRank() != 0 ||
          r.getOperand().getType().getRank() == 0 ||
          !isa<FloatType>(r.getType().getElementType()))
        continue;
      if (Operation *total = totalOf(r))
        totals[total].push_back(r);
    }
    for (auto &[total, sums] : totals) {
      for (size_t at = 0; at < sums.size();) {
        Group g;
        g.kind = kMultiTensorFusion;
        SmallVector<Operation *> members;
        size_t next = at;
        for (; next < sums.size() &&
               static_cast<int64_t>(members.size()) < options.maxTensors;
             ++next) {
          Operation *r = sums[next];
          if (llvm::any_of(members,
                           [&](Operation *m) { return dependsOn(r, m); }))
            continue;
          Group grown = g;
          grown.ops.insert(r);
          growProducers(grown, r->getOperands(), numElements(r->getOperand(0)),
                        -1,
                        /*budget=*/false);
          if (!members.empty() && paramBytes(grown) > kParamBytes)
            break;
          g = std::move(grown);
          members.push_back(r);
        }
        at = next;
        if (members.size() < 2)
          continue;
        growScalarEpilogue(g, pos[members.front()]);
        commit(std::move(g));
      }
    }
  }

  /// Adds the rank-0 elementwise ops after `first` that read `g` and whose
  /// other operands exist before `first`.
  void growScalarEpilogue(Group &g, int64_t first) {
    for (bool grew = true; grew;) {
      grew = false;
      for (Operation &op : block) {
        if (pos[&op] <= first || !isFree(&op) || g.contains(&op) ||
            fusionRole(&op) != FusionRole::Elementwise ||
            cast<RankedTensorType>(op.getResult(0).getType()).getRank() != 0)
          continue;
        bool reads = false, ok = true;
        for (Value v : op.getOperands()) {
          Operation *d = v.getDefiningOp();
          if (d && g.ops.contains(d) &&
              cast<RankedTensorType>(v.getType()).getRank() == 0)
            reads = true;
          else if (!availableBefore(v, first, g))
            ok = false;
        }
        if (reads && ok) {
          g.ops.insert(&op);
          grew = true;
        }
      }
    }
  }

  //===--------------------------------------------------------------------===//
  // Phase 3: reductions and row ops
  //===--------------------------------------------------------------------===//

  /// Whether `op` depends on a result of `root` (walking back no further
  /// than `root`).
  bool dependsOn(Operation *op, Operation *root) {
    int64_t floor = pos[root];
    SmallVector<Operation *> work{op};
    llvm::DenseSet<Operation *> seen;
    while (!work.empty()) {
      Operation *o = work.pop_back_val();
      if (o == root)
        return true;
      if (!seen.insert(o).second)
        continue;
      for (Value v : o->getOperands())
        if (Operation *d = v.getDefiningOp();
            d && d->getBlock() == &block && pos[d] >= floor)
          work.push_back(d);
    }
    return false;
  }

  /// Whether a member of `g` has a user outside it before `s` (then the
  /// fusion, which must follow `s`, could not precede that user).
  bool usedBefore(const Group &g, Operation *s) {
    for (Operation *m : g.ops)
      for (Operation *u : m->getUsers())
        if (!g.ops.contains(u) &&
            pos[block.findAncestorOpInBlock(*u)] < pos[s])
          return true;
    return false;
  }

  void formReductionGroups() {
    // The reductions in block order: a root's siblings are found among
    // those after it, not by a walk over the rest of the block.
    SmallVector<Operation *> reductions;
    for (Operation &op : block)
      if (fusionRole(&op) == FusionRole::Reduce)
        reductions.push_back(&op);
    // Only reductions whose balls meet can share a producer: a value in
    // both cones, which walk on through free elementwise/view ops.
    ReductionBalls near(block, reductions, 3);
    auto passes = [&](Operation *op) { return isFree(op) && isEltOrView(op); };
    for (Operation &root : block) {
      FusionRole role = fusionRole(&root);
      if (!isFree(&root) || !(role == FusionRole::Reduce ||
                              (role == FusionRole::RowOp && options.rowOps)))
        continue;
      Group g;
      g.kind = kReductionFusion;
      g.ops.insert(&root);
      SmallVector<Value> inputs{root.getOperand(0)};
      if (role == FusionRole::Reduce) {
        ValueList mine;
        walkCone(root.getOperand(0), 3, passes, mine, {});
        Type type = root.getOperand(0).getType();
        Attribute dims = root.getAttr("dims"), keep = root.getAttr("keepdim");
        auto after = llvm::upper_bound(
            reductions, &root,
            [&](Operation *a, Operation *b) { return pos.before(a, b); });
        unsigned self = static_cast<unsigned>(after - reductions.begin()) - 1;
        assert(reductions[self] == &root && "a root missing from the list");
        for (unsigned j : near.laterMeeting(self)) {
          Operation &s = *reductions[j];
          if (!isFree(&s) || s.getOperand(0).getType() != type ||
              s.getAttr("dims") != dims || s.getAttr("keepdim") != keep)
            continue;
          ValueList theirs;
          bool shared = walkCone(s.getOperand(0), 3, passes, theirs, mine);
          if (!shared || dependsOn(&s, &root) || usedBefore(g, &s))
            continue;
          g.ops.insert(&s);
          inputs.push_back(s.getOperand(0));
          if (!fits(g)) {
            g.ops.remove(&s);
            inputs.pop_back();
          }
        }
      }
      // A row op reads its other operands (gamma, beta, targets, the loss
      // gradient) as fusion inputs, never computed inside.
      if (role == FusionRole::RowOp)
        for (Value v : root.getOperands().drop_front())
          inputsOnly.insert(v);
      // A row op whose result has its input's size stores every element
      // once, so its kernel can store a prologue value there too: a
      // producer of that size that later ops also read (the residual sum
      // a layer_norm normalizes) joins, and the fusion yields it.
      int64_t outsideAfter =
          role == FusionRole::RowOp && numElements(root.getResult(0)) ==
                                           numElements(root.getOperand(0))
              ? pos[&root]
              : -1;
      growProducers(g, inputs, numElements(root.getOperand(0)), outsideAfter);
      growEpilogue(g, numElements(root.getResult(0)), pos[&root]);
      inputsOnly.clear();
      if (g.ops.size() + g.dups.size() > 1)
        commit(std::move(g));
    }
  }

  /// Adds consumers of the roots' results with `domain` elements (and
  /// their consumers) whose other operands are available before `first`.
  void growEpilogue(Group &g, int64_t domain, int64_t first) {
    SmallVector<Operation *> out; // roots, then epilogue ops
    for (Operation *m : g.ops)
      if (!isEltOrView(m))
        out.push_back(m);
    llvm::DenseSet<Operation *> outSet(out.begin(), out.end());
    for (size_t i = 0; i < out.size(); ++i) {
      for (Operation *c : out[i]->getUsers()) {
        if (!isFree(c) || g.contains(c) || !isEltOrView(c) ||
            c->getNumResults() != 1 || numElements(c->getResult(0)) != domain)
          continue;
        bool ok = llvm::all_of(c->getOperands(), [&](Value v) {
          Operation *d = v.getDefiningOp();
          return (d && outSet.contains(d)) || availableBefore(v, first, g);
        });
        if (!ok)
          continue;
        g.ops.insert(c);
        if (!fits(g)) {
          g.ops.remove(c);
          continue;
        }
        out.push_back(c);
        outSet.insert(c);
        SmallVector<Value> side;
        for (Value v : c->getOperands())
          if (!v.getDefiningOp() || !g.contains(v.getDefiningOp()))
            side.push_back(v);
        growProducers(g, side, domain);
      }
    }
  }

  //===--------------------------------------------------------------------===//
  // Phase 4: loops
  //===--------------------------------------------------------------------===//

  void formLoopGroups() {
    for (Operation &sink : llvm::reverse(block)) {
      // A view sink would only materialize an index map: its consumers
      // duplicate it instead.
      if (!isFree(&sink) || fusionRole(&sink) != FusionRole::Elementwise ||
          sink.getNumResults() != 1 || copiedIntoEveryUser(&sink))
        continue;
      Group g;
      g.kind = kLoopFusion;
      g.ops.insert(&sink);
      growProducers(g, sink.getOperands(), numElements(sink.getResult(0)),
                    pos[&sink], /*budget=*/true, /*pads=*/true);
      if (g.ops.size() + g.dups.size() > 1)
        commit(std::move(g));
    }
  }

  //===--------------------------------------------------------------------===//
  // Outlining
  //===--------------------------------------------------------------------===//

  void outlineAll() {
    // Duplicates that became members elsewhere are inputs instead.
    for (Group &g : groups)
      g.dups.remove_if([&](Operation *d) { return taken.contains(d); });
    std::vector<Group *> order;
    for (Group &g : groups)
      order.push_back(&g);
    auto last = [&](Group *g) {
      int64_t p = -1;
      for (Operation *op : g->ops)
        p = std::max(p, pos[op]);
      return p;
    };
    llvm::stable_sort(order,
                      [&](Group *a, Group *b) { return last(a) < last(b); });
    for (Group *g : order)
      outline(*g);
    // Views, casts and recomputable ops that every user now duplicates
    // are dead.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if ((copiedIntoFusions(&op) || recomputableInFusions(&op)) &&
          op.use_empty())
        op.erase();
  }

  void outline(Group &g) {
    // A reshape/stop_gradient of a group value read only after the group
    // leaves it: the fusion yields its operand and the op, placed after
    // the fusion, is a view (step-memory-plan) instead of a second buffer.
    int64_t lastPos = -1;
    for (Operation *op : g.ops)
      lastPos = std::max(lastPos, pos[op]);
    SmallVector<Operation *> views;
    for (Operation *op : g.ops) {
      Operation *d = isa<ReshapeOp, StopGradientOp>(op)
                         ? op->getOperand(0).getDefiningOp()
                         : nullptr;
      if (!d || !g.ops.contains(d) || g.kind == kMatmulFusion)
        continue;
      bool after = llvm::all_of(op->getUsers(), [&](Operation *u) {
        return !g.ops.contains(u) &&
               pos[block.findAncestorOpInBlock(*u)] > lastPos;
      });
      if (after)
        views.push_back(op);
    }
    for (Operation *v : views)
      g.ops.remove(v);
    SmallVector<Operation *> body(g.ops.begin(), g.ops.end());
    body.append(g.dups.begin(), g.dups.end());
    llvm::sort(body, [&](Operation *a, Operation *b) {
      return pos[a] < pos[b];
    });
    SmallVector<Value> outputs;
    int64_t defined = -1, firstUse = INT64_MAX;
    Operation *firstUser = nullptr, *lastMember = nullptr;
    for (Operation *op : body) {
      for (Value v : op->getOperands())
        if (!v.getDefiningOp() || !g.contains(v.getDefiningOp()))
          defined = std::max(
              defined, v.getDefiningOp() ? pos[v.getDefiningOp()] : -1);
      if (!g.ops.contains(op))
        continue;
      if (!lastMember || pos.before(lastMember, op))
        lastMember = op;
      for (Value r : op->getResults()) {
        bool outside = false;
        for (OpOperand &use : r.getUses())
          if (!g.ops.contains(use.getOwner())) {
            outside = true;
            if (llvm::is_contained(views, use.getOwner()))
              continue; // moves after the fusion
            Operation *user = block.findAncestorOpInBlock(*use.getOwner());
            if (pos[user] < firstUse) {
              firstUse = pos[user];
              firstUser = user;
            }
          }
        if (outside)
          outputs.push_back(r);
      }
    }
    if (outputs.empty() || defined >= firstUse) {
      for (Operation *v : views)
        g.ops.insert(v);
      return; // nothing to compute, or no SSA-valid place for the fusion
    }
    // Before the first outside user or right after the last member,
    // whichever comes first.
    Operation *before = firstUser && pos.before(firstUser, lastMember)
                            ? firstUser
                            : lastMember->getNextNode();
    llvm::SmallPtrSet<Value, 8> yielded(outputs.begin(), outputs.end());
    FusionOp fusion = mergeUnits(body, before, g.kind,
                                 [&](Value r) { return yielded.contains(r); });
    pos.place(fusion);
    // At its last-added member's location (profiles and guards name it).
    fusion->setLoc(g.ops.back()->getLoc());
    fusion.getYield()->setLoc(g.ops.back()->getLoc());
    for (auto [v, r] : llvm::zip(outputs, fusion.getResults()))
      v.replaceUsesWithIf(
          r, [&](OpOperand &use) { return !g.ops.contains(use.getOwner()); });
    for (Operation *v : llvm::reverse(views)) {
      v->moveAfter(fusion);
      pos.place(v);
    }
    for (Operation *op : llvm::reverse(body))
      if (g.ops.contains(op)) {
        pos.forget(op);
        op->erase();
      }
  }
};

struct FusePass : impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    if (maxOps < 2 || maxInputs < 1 || maxTensors < 2) {
      getOperation().emitError()
          << "step-fuse: max-ops must be >= 2, max-inputs >= 1 and "
             "max-tensors >= 2, found "
          << static_cast<int64_t>(maxOps) << ", "
          << static_cast<int64_t>(maxInputs) << ", "
          << static_cast<int64_t>(maxTensors);
      return signalPassFailure();
    }
    FuseOptions o;
    o.maxOps = maxOps;
    o.maxInputs = maxInputs;
    o.multiTensor = multiTensor;
    o.maxTensors = maxTensors;
    o.epilogues = epilogues;
    o.geluEpilogues = geluEpilogues;
    o.rowOps = rowOps;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        Fuser(f, o).run();
  }
};

} // namespace
} // namespace mlir::step
