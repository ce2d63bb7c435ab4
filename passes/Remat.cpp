//===- Remat.cpp - Recompute forward values to fit a memory budget --------===//
//
// step-remat decides which forward values of a one-block training step the
// backward keeps (they live from the forward into the backward) and which
// it recomputes from kept ones, just before their first backward use.
//
// Guarantees:
//   * Results are bit-identical: a recomputed value is a clone of the op
//     that computed it, on the same operands (kept values or clones of the
//     same ops), and every step op is pure and deterministic (dropout is
//     counter-based and seeded). No op is moved, removed or reordered.
//   * In mode `budget`, the arena of the function's memory plan
//     (passes/MemoryPlan.h, measured after step-fuse when `fuse`) is at
//     most `budget`; if no choice the pass weighs fits, it fails with the
//     smallest peak it found. Every mode records what it chose in the
//     function's `step.remat` dictionary: the mode, the planned peak
//     before and after, the saved bytes before and after, the recomputed
//     ops and their FLOPs (Activations.h's cost model) against the step's.
//
// Algorithm:
//   1. Forward values and saved activations (Activations.h). A forward op is
//     *recomputable* if it has no regions (step.fusion: run step-remat
//     before step-fuse).
//   2. Hints: a value computed inside a checkpoint scope (`step.checkpoint`
//     = id) whose users are all in the same scope (or in the backward) is
//     recomputed; the scope's outputs and inputs are kept, as
//     torch.utils.checkpoint. Every mode applies the hints.
//   3. `auto` and up: a min-cut (as the min-cut partitioner of
//     torch.compile): each forward value v is an edge v_in -> v_out whose
//     capacity is its bytes (0 for arguments and constants, which live
//     anyway; unbounded for hinted values, which are never kept); operand
//     -> result edges are unbounded; values whose op is not elementwise or
//     a view (matmul, attention, reductions, row ops, gathers) are fed from
//     the source, i.e. never recomputed; saved values and function results
//     drain into the sink. A minimum cut (Dinic's max-flow) is the set of
//     values to keep with the fewest bytes; everything on the sink side is
//     recomputed, by elementwise ops that step-fuse folds into the backward
//     kernels that read them (one pass over memory, no extra kernel).
//   4. `max` and `budget`: segments. A forward value is a *cut point* if,
//     right after it is computed, it is the only forward value a later
//     forward op still reads (the residual stream between transformer
//     sub-blocks, every value of a chain). A segment is the run of forward
//     ops from one cut point to the next cut point at which the run holds
//     a value the backward reads (so the head of a chain joins the next
//     segment; forward ops after the last one are in none). Recomputing a
//     segment recomputes every value it computes (matmuls too) in the
//     backward. Recomputed segments form groups of at most g consecutive
//     ones; a group is recomputed from its input, the cut point before it,
//     which is kept, and its values are live together during its backward
//     (g = 2 on GPT-2: a whole block from its input, half the residuals
//     kept).
//     The choice is a subset of segments and g. With at most `exact-limit`
//     candidates every subset and g in 1..4 is measured (exact over this
//     space). Otherwise segments are taken greedily by saved bytes per
//     FLOP: `max` recomputes them all and keeps the g with the lowest
//     planned peak; `budget` binary-searches the shortest prefix of the
//     greedy order whose plan fits (a prefix's FLOPs grow with its length,
//     so the cheapest fitting prefix is found; the peak is assumed to fall
//     with it, which the final check does not assume), then prunes: each
//     chosen segment, least bytes per FLOP first, is dropped again if the
//     plan still fits (max: if the peak does not rise). Its gap to the
//     exact choice is measured on small models by the tests (RematTest)
//     and reported in docs/remat.md.
//   5. Apply: walk the backward ops in order; each operand in the recompute
//     set is replaced by its clone, made (with its own recomputed operands,
//     recursively) just before the first backward op needing it and shared
//     by the later ones.
//
// After step-offload (the pipeline runs it between this pass's min-cut and
// its segment search): a value read only by the forward and step.offload
// is not saved (Activations.h), and an offload keeps reading the forward
// value, never a recomputed clone.
//
// Cost: the analysis and the min-cut are O(V * E) at worst (Dinic on a
// graph of 2V nodes; near-linear on training steps). Each candidate choice
// is measured by cloning the function, applying it, fusing and planning:
// O(N log N) for N ops; for S candidate segments `max` measures 6 + S
// choices, `budget` about 4 log2(S) + S, the exact search 4 * 2^S
// (S <= exact-limit). A measurement is dominated by the fusion passes
// (planCandidate, MemoryPlan.h). Measurements run on the context's threads
// (up to 8 at once, each holding a clone of the step): the group sizes of
// a prefix, the exact search's choices in batches, and the prune's drops
// a batch at a time, measured against the same current choice since drops
// are rarely accepted (4 of 103 on a 48-layer GPT-2); after an accepted
// one, the rest of its batch is measured again. Only the measurements the
// one-at-a-time search would make are recorded, in its order, so the
// result is the same on any number of threads (RematSolver test); the
// counts above are of those recorded, and each accepted drop adds up to
// width - 1 measurements made and dropped. A failed measurement, recorded
// or not, ends the search. GPT-2 124M bf16 B=8 (31 segments) takes 0.57 s
// to compile without kernels with max on 2 cores against 0.19 s without
// remat, the 24-layer width-1024 model (55 segments) 1.48 s against
// 0.32 s (docs/remat.md, "Compile time").
//
//===----------------------------------------------------------------------===//

#include "passes/Activations.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Threading.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>

namespace mlir::step {
#define GEN_PASS_DEF_REMAT
#include "passes/Passes.h.inc"

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;

/// Dinic's maximum flow and the minimum cut it proves.
class MaxFlow {
public:
  explicit MaxFlow(int nodes) : adj(nodes), level(nodes), next(nodes) {}

  void edge(int from, int to, int64_t capacity) {
    adj[from].push_back(static_cast<int>(edges.size()));
    edges.push_back({to, capacity});
    adj[to].push_back(static_cast<int>(edges.size()));
    edges.push_back({from, 0});
  }

  int64_t run(int source, int sink) {
    int64_t flow = 0;
    while (levels(source, sink)) {
      std::fill(next.begin(), next.end(), 0);
      while (int64_t f = augment(source, sink, kUnbounded))
        flow += f;
    }
    return flow;
  }

  /// After run(): the nodes with a path to the sink in the residual graph,
  /// the sink side of the minimum cut closest to the sink.
  std::vector<bool> sinkSide(int sink) const {
    std::vector<bool> seen(adj.size(), false);
    seen[sink] = true;
    std::deque<int> queue{sink};
    while (!queue.empty()) {
      int v = queue.front();
      queue.pop_front();
      for (int e : adj[v]) { // edges[e ^ 1] runs from edges[e].to into v
        int u = edges[e].to;
        if (!seen[u] && edges[e ^ 1].capacity > 0) {
          seen[u] = true;
          queue.push_back(u);
        }
      }
    }
    return seen;
  }

private:
  struct Edge {
    int to;
    int64_t capacity;
  };

  /// BFS levels over edges with capacity left; whether the sink is reached.
  bool levels(int source, int sink) {
    std::fill(level.begin(), level.end(), -1);
    level[source] = 0;
    std::deque<int> queue{source};
    while (!queue.empty()) {
      int u = queue.front();
      queue.pop_front();
      for (int e : adj[u])
        if (edges[e].capacity > 0 && level[edges[e].to] < 0) {
          level[edges[e].to] = level[u] + 1;
          queue.push_back(edges[e].to);
        }
    }
    return level[sink] >= 0;
  }

  int64_t augment(int u, int sink, int64_t limit) {
    if (u == sink)
      return limit;
    for (int &i = next[u]; i < static_cast<int>(adj[u].size()); ++i) {
      Edge &e = edges[adj[u][i]];
      if (e.capacity <= 0 || level[e.to] != level[u] + 1)
        continue;
      if (int64_t f = augment(e.to, sink, std::min(limit, e.capacity))) {
        e.capacity -= f;
        edges[adj[u][i] ^ 1].capacity += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<std::vector<int>> adj;
  std::vector<Edge> edges;
  std::vector<int> level, next;
};

using ValueSet = llvm::DenseSet<Value>;

bool recomputable(Operation *op) {
  return op->getNumRegions() == 0 && !isa<ConstantOp>(op);
}

bool elementwiseOrView(Operation *op) {
  FusionRole role = fusionRole(op);
  return role == FusionRole::Elementwise || role == FusionRole::View;
}

/// Replaces every use of a value of `recompute` by a non-forward op with a
/// clone made just before the first such op; returns the clones' FLOPs.
struct Applied {
  int64_t ops = 0, flops = 0;
};
Applied apply(func::FuncOp f, const ValueSet &recompute,
              const SavedActivations &fwd) {
  Block &body = f.getBody().front();
  SmallVector<Operation *> backward;
  for (Operation &op : body)
    // An offload reads the forward value itself, in the forward.
    if (!isa<func::ReturnOp, OffloadOp>(op) &&
        llvm::none_of(op.getResults(),
                      [&](Value r) { return fwd.forward.contains(r); }))
      backward.push_back(&op);
  llvm::DenseMap<Value, Value> cloneOf;
  Applied applied;
  std::function<Value(Value, Operation *)> materialize = [&](Value v,
                                                             Operation *at) {
    if (auto it = cloneOf.find(v); it != cloneOf.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    IRMapping map;
    for (Value operand : def->getOperands())
      if (recompute.contains(operand))
        map.map(operand, materialize(operand, at));
    OpBuilder b(at);
    Operation *clone = b.clone(*def, map);
    clone->setAttr("step.recomputed", b.getUnitAttr());
    ++applied.ops;
    applied.flops += opFlops(clone);
    for (auto [r, c] : llvm::zip(def->getResults(), clone->getResults()))
      cloneOf[r] = c;
    return cloneOf[v];
  };
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (recompute.contains(use.get()))
        use.set(materialize(use.get(), op));
  return applied;
}

/// A run of forward ops between two cut points.
struct Segment {
  SmallVector<Value> values; ///< recomputable results, the cut point last
  Value cut;                 ///< the value ending the segment
  int64_t savedBytes = 0;    ///< of its values the backward reads
  int64_t flops = 0;         ///< of recomputing its values
};

/// One choice: the segments recomputed and the most per group.
struct Choice {
  llvm::SmallVector<bool> segments;
  int64_t group = 1;
};

struct Measured {
  int64_t peak = 0;
  Applied applied;
  int64_t savedBytes = 0;
};

struct RematPass : impl::RematBase<RematPass> {
  using RematBase::RematBase;

  void runOnOperation() override;

private:
  func::FuncOp f;
  SavedActivations fwd;
  SmallVector<Operation *> forwardOps;
  ValueSet base; ///< hints (+ the min-cut from auto on)
  SmallVector<Segment> segments;
  /// Measurements run at once (each holds a clone of the step): the
  /// context's threads, at most 8; 1 without multithreading.
  size_t width = 1;

  void collectForward();
  ValueSet hinted();
  void minCut(ValueSet &out);
  void findSegments();
  ValueSet recomputeSet(const Choice &c) const;
  FailureOr<Measured> measure(const ValueSet &recompute);
  SmallVector<FailureOr<Measured>> measureAll(ArrayRef<ValueSet> recompute);
  SmallVector<FailureOr<Measured>> measureAll(ArrayRef<Choice> choices);
  std::optional<std::pair<Choice, Measured>>
  search(bool minimizePeak, std::optional<int64_t> budget,
         int64_t &smallestPeak);
};

void RematPass::collectForward() {
  fwd = savedActivations(f);
  forwardOps.clear();
  for (Operation &op : f.getBody().front())
    if (!isa<ConstantOp>(op) && llvm::any_of(op.getResults(), [&](Value r) {
          return fwd.forward.contains(r);
        }))
      forwardOps.push_back(&op);
}

ValueSet RematPass::hinted() {
  ValueSet out;
  auto scopeOf = [](Operation *op) -> std::optional<int64_t> {
    if (auto id = op->getAttrOfType<IntegerAttr>("step.checkpoint"))
      return id.getInt();
    return std::nullopt;
  };
  for (Operation *op : forwardOps) {
    std::optional<int64_t> scope = scopeOf(op);
    if (!scope || !recomputable(op))
      continue;
    for (Value r : op->getResults()) {
      // An output of the scope: read by a forward op outside it, or returned.
      bool output = llvm::any_of(r.getUsers(), [&](Operation *user) {
        if (isa<func::ReturnOp>(user))
          return true;
        bool forwardUser = llvm::any_of(user->getResults(), [&](Value u) {
          return fwd.forward.contains(u);
        });
        return forwardUser && scopeOf(user) != scope;
      });
      if (!output)
        out.insert(r);
    }
  }
  return out;
}

void RematPass::minCut(ValueSet &out) {
  // Nodes: 0 source, 1 sink, 2i / 2i + 1 the in / out of forward value i.
  llvm::DenseMap<Value, int> id;
  SmallVector<Value> values;
  for (Operation *op : forwardOps)
    for (Value operand : op->getOperands())
      if (!id.count(operand)) {
        id[operand] = static_cast<int>(values.size()) + 1;
        values.push_back(operand);
      }
  for (Operation *op : forwardOps)
    for (Value r : op->getResults())
      if (!id.count(r)) {
        id[r] = static_cast<int>(values.size()) + 1;
        values.push_back(r);
      }
  auto in = [&](Value v) { return 2 * id[v]; };
  auto outNode = [&](Value v) { return 2 * id[v] + 1; };
  MaxFlow flow(2 * static_cast<int>(values.size()) + 2);
  ValueSet saved(fwd.saved.begin(), fwd.saved.end());
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    bool free = !def || isa<ConstantOp>(def);
    bool hint = base.contains(v);
    flow.edge(in(v), outNode(v),
              free   ? 0
              : hint ? kUnbounded
                     : tensorBytes(v.getType()));
    if (free || (!hint && !(recomputable(def) && elementwiseOrView(def))))
      flow.edge(0, in(v), kUnbounded);
    bool returned = llvm::any_of(
        v.getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); });
    if (saved.contains(v) || returned)
      flow.edge(outNode(v), 1, kUnbounded);
  }
  for (Operation *op : forwardOps)
    for (Value operand : op->getOperands())
      for (Value r : op->getResults())
        flow.edge(outNode(operand), in(r), kUnbounded);
  flow.run(0, 1);
  // Of the minimum cuts, the one closest to the sink: ties between keeping
  // a value and keeping what it is computed from go to keeping the value.
  std::vector<bool> sinkSide = flow.sinkSide(1);
  for (Value v : values)
    if (sinkSide[in(v)])
      out.insert(v);
}

void RematPass::findSegments() {
  segments.clear();
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(forwardOps))
    index[op] = static_cast<int64_t>(i);
  // The last forward op reading each value (returned: never dies).
  llvm::DenseMap<Value, int64_t> lastRead;
  for (Operation *op : forwardOps)
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        int64_t at = isa<func::ReturnOp>(user) ? kUnbounded
                     : index.count(user)       ? index[user]
                                               : -1;
        lastRead[r] = std::max(lastRead.lookup(r), at);
      }
  ValueSet saved(fwd.saved.begin(), fwd.saved.end());
  // Values computed from params, state and constants alone (a param's
  // 16-bit copy, a broadcast bias) are no part of the activation chain:
  // they do not count as live. Inputs (the batch) are.
  ValueSet fromArgs;
  ValueSet live;
  Segment current;
  for (auto [i, op] : llvm::enumerate(forwardOps)) {
    bool argsOnly = llvm::all_of(op->getOperands(), [&](Value v) {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        auto kind =
            f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "step.kind");
        return !kind || kind.getValue() != "input";
      }
      return isa<ConstantOp>(v.getDefiningOp()) || fromArgs.contains(v);
    });
    for (Value operand : op->getOperands())
      if (lastRead.lookup(operand) == static_cast<int64_t>(i))
        live.erase(operand);
    for (Value r : op->getResults()) {
      if (argsOnly)
        fromArgs.insert(r);
      else if (lastRead.lookup(r) > static_cast<int64_t>(i))
        live.insert(r);
      if (recomputable(op))
        current.values.push_back(r);
    }
    if (recomputable(op))
      current.flops += opFlops(op);
    if (live.size() == 1 && op->getNumResults() == 1 &&
        live.contains(op->getResult(0))) {
      // A segment ends at a cut point once the backward reads something
      // of it; until then it grows (the head of a chain is no segment).
      int64_t bytes = 0;
      for (Value v : current.values)
        if (saved.contains(v))
          bytes += tensorBytes(v.getType());
      if (bytes > 0) {
        current.cut = op->getResult(0);
        current.savedBytes = bytes;
        segments.push_back(current);
        current = Segment();
      }
    }
  }
}

ValueSet RematPass::recomputeSet(const Choice &c) const {
  ValueSet out = base;
  // Recomputed segments form groups of at most c.group consecutive ones;
  // each group is recomputed from its input, the cut point before it,
  // which is kept (even where the min-cut would recompute it).
  SmallVector<Value> inputs;
  int64_t run = 0;
  for (auto [i, s] : llvm::enumerate(segments)) {
    if (!c.segments[i]) {
      run = 0;
      continue;
    }
    out.insert(s.values.begin(), s.values.end());
    if (run == 0 && i > 0)
      inputs.push_back(segments[i - 1].cut);
    if (++run == c.group)
      run = 0;
  }
  for (Value v : inputs)
    out.erase(v);
  return out;
}

FailureOr<Measured> RematPass::measure(const ValueSet &recompute) {
  IRMapping map;
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(f.getLoc());
  auto copy = cast<func::FuncOp>(f->clone(map));
  scratch->push_back(copy);
  ValueSet mapped;
  for (Value v : recompute)
    mapped.insert(map.lookup(v));
  SavedActivations copyFwd = savedActivations(copy);
  Measured m;
  m.applied = apply(copy, mapped, copyFwd);
  m.savedBytes = savedActivations(copy).bytes;
  FailureOr<ArenaPlan> plan =
      planCandidate(copy, fuse, {geluEpilogues, bgradEpilogues}, alignment);
  if (failed(plan))
    return failure();
  m.peak = plan->peak;
  return m;
}

SmallVector<FailureOr<Measured>>
RematPass::measureAll(ArrayRef<ValueSet> recompute) {
  SmallVector<FailureOr<Measured>> out(recompute.size(), failure());
  // Each measurement reads f and builds its own scratch module; nothing
  // else is shared (the context uniques attributes and types under its
  // locks, and orders the diagnostics of a batch by index). At most
  // `width` clones at once, however many threads the pool has.
  for (size_t at = 0; at < recompute.size(); at += width)
    parallelFor(&getContext(), at, std::min(recompute.size(), at + width),
                [&](size_t i) { out[i] = measure(recompute[i]); });
  return out;
}

SmallVector<FailureOr<Measured>>
RematPass::measureAll(ArrayRef<Choice> choices) {
  SmallVector<ValueSet> sets;
  for (const Choice &c : choices)
    sets.push_back(recomputeSet(c));
  return measureAll(sets);
}

std::optional<std::pair<Choice, Measured>>
RematPass::search(bool minimizePeak, std::optional<int64_t> budget,
                  int64_t &smallestPeak) {
  std::optional<std::pair<Choice, Measured>> best;
  bool broken = false;
  // What the search learns from one measured choice, taken in the order a
  // one-at-a-time search would measure them: the batches below measure
  // ahead in parallel, but only choices the sequential search would have
  // measured are recorded, in its order, so the result does not depend on
  // the number of threads. A failed measurement ends the search.
  auto record = [&](const Choice &c,
                    const FailureOr<Measured> &m) -> std::optional<Measured> {
    if (failed(m)) {
      broken = true;
      return std::nullopt;
    }
    smallestPeak = std::min(smallestPeak, m->peak);
    bool fits = !budget || m->peak <= *budget;
    auto key = [&](const Measured &x) {
      return minimizePeak ? std::make_pair(x.peak, x.applied.flops)
                          : std::make_pair(x.applied.flops, x.peak);
    };
    if (fits && (!best || key(*m) < key(best->second)))
      best = std::make_pair(c, *m);
    return *m;
  };
  // Measures `choices` together and records them in order up to the first
  // failure or the first measurement `stop` accepts (the one-at-a-time
  // search would measure the rest against what it learnt there); returns
  // what it recorded. A failed measurement ends the search even where the
  // one-at-a-time search would not have made it (its errors are reported).
  auto considerAll =
      [&](ArrayRef<Choice> choices,
          llvm::function_ref<bool(const Measured &)> stop = nullptr) {
        SmallVector<FailureOr<Measured>> measured = measureAll(choices);
        SmallVector<std::optional<Measured>> out;
        for (auto [c, m] : llvm::zip(choices, measured)) {
          out.push_back(record(c, m));
          if (broken || (stop && out.back() && stop(*out.back())))
            break;
        }
        broken = broken || llvm::any_of(measured, [](const auto &m) {
                   return failed(m);
                 });
        return out;
      };
  auto choiceOf = [&](ArrayRef<size_t> chosen, int64_t group) {
    Choice c;
    c.segments.assign(segments.size(), false);
    for (size_t i : chosen)
      c.segments[i] = true;
    c.group = group;
    return c;
  };
  const int64_t maxGroup = 4;
  // Every segment holds a saved value (findSegments): each is a candidate.
  size_t n = segments.size();
  if (static_cast<int64_t>(n) <= exactLimit) {
    SmallVector<Choice> batch;
    auto flush = [&] {
      if (!broken)
        considerAll(batch);
      batch.clear();
    };
    for (uint64_t mask = 1; mask < (uint64_t(1) << n) && !broken; ++mask) {
      SmallVector<size_t> chosen;
      for (size_t b = 0; b < n; ++b)
        if (mask >> b & 1)
          chosen.push_back(b);
      for (int64_t g = 1; g <= std::min<int64_t>(maxGroup, chosen.size()); ++g)
        batch.push_back(choiceOf(chosen, g));
      if (batch.size() >= 4 * width)
        flush();
    }
    flush();
    return broken ? std::nullopt : best;
  }
  // Greedy order: saved bytes per FLOP, largest first (ties: later first,
  // whose backward comes first).
  SmallVector<size_t> order;
  for (size_t i = n; i-- > 0;)
    order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Segment &x = segments[a], &y = segments[b];
    return static_cast<double>(x.savedBytes) *
               static_cast<double>(std::max<int64_t>(1, y.flops)) >
           static_cast<double>(y.savedBytes) *
               static_cast<double>(std::max<int64_t>(1, x.flops));
  });
  // The first k of the order, each group size.
  auto groupings = [&](size_t k) {
    SmallVector<Choice> out;
    ArrayRef<size_t> chosen(order.data(), k);
    for (int64_t g = 1; g <= std::min<int64_t>(maxGroup, k); ++g)
      out.push_back(choiceOf(chosen, g));
    return out;
  };
  // The lowest peak over the group sizes for the first k of the order.
  auto prefix = [&](size_t k) -> int64_t {
    int64_t low = kUnbounded;
    for (const std::optional<Measured> &m : considerAll(groupings(k)))
      if (m)
        low = std::min(low, m->peak);
    return low;
  };
  // Pruning: drop each chosen segment of `from` again (the least bytes
  // per FLOP first) if `keep` accepts the plan without it. Drops are
  // rarely accepted (4 of 103 on a 48-layer GPT-2), so `width` of them
  // are measured at once against the same `from`; after an accepted one
  // the rest of the batch is measured again against the new `from`.
  auto prune = [&](std::pair<Choice, Measured> from, auto keep) {
    SmallVector<size_t> todo;
    for (size_t i : llvm::reverse(order))
      if (from.first.segments[i])
        todo.push_back(i);
    for (size_t next = 0; next < todo.size() && !broken;) {
      SmallVector<Choice> batch;
      for (size_t k = next; k < std::min(todo.size(), next + width); ++k) {
        batch.push_back(from.first);
        batch.back().segments[todo[k]] = false;
      }
      auto accepted = [&](const Measured &m) { return keep(m, from.second); };
      SmallVector<std::optional<Measured>> got = considerAll(batch, accepted);
      next += got.size();
      if (!broken && got.back() && accepted(*got.back()))
        from = std::make_pair(batch[got.size() - 1], *got.back());
    }
    return from;
  };
  // The lowest peak: everything recomputed, then drops that do not raise
  // the peak (recomputing more can lengthen the life of a kept input).
  std::optional<std::pair<Choice, Measured>> lowest;
  SmallVector<Choice> all = groupings(n);
  for (auto [c, m] : llvm::zip(all, considerAll(all)))
    if (m && (!lowest || m->peak < lowest->second.peak))
      lowest = std::make_pair(c, *m);
  if (broken || !lowest)
    return std::nullopt;
  if (!budget || lowest->second.peak > *budget) {
    lowest = prune(*lowest, [](const Measured &m, const Measured &now) {
      return m.peak < now.peak ||
             (m.peak == now.peak && m.applied.flops <= now.applied.flops);
    });
    if (broken || (budget && lowest->second.peak > *budget))
      return std::nullopt;
    return lowest;
  }
  // A budget the full choice meets: the shortest fitting prefix, pruned.
  size_t lo = 1, hi = n; // prefix(hi) fits
  while (lo < hi && !broken) {
    size_t mid = (lo + hi) / 2;
    if (prefix(mid) <= *budget)
      hi = mid;
    else
      lo = mid + 1;
  }
  if (broken || !best)
    return std::nullopt;
  int64_t limit = *budget;
  best = prune(*best, [&](const Measured &m, const Measured &now) {
    return m.peak <= limit && m.applied.flops <= now.applied.flops;
  });
  return broken ? std::nullopt : best;
}

void RematPass::runOnOperation() {
  FailureOr<func::FuncOp> step =
      unfusedStep(getOperation(), funcName, "step-remat");
  if (failed(step))
    return signalPassFailure();
  f = *step;
  if (mode != "none" && mode != "auto" && mode != "max" && mode != "budget") {
    f.emitError() << "step-remat: unknown mode '" << mode
                  << "', expected none, auto, max or budget";
    return signalPassFailure();
  }
  if ((mode == "budget") != (budget > 0)) {
    f.emitError() << "step-remat: mode budget needs budget > 0 bytes and "
                     "only it takes one (found mode "
                  << mode << ", budget " << static_cast<int64_t>(budget) << ")";
    return signalPassFailure();
  }
  collectForward();
  int64_t stepFlops = 0;
  for (Operation &op : f.getBody().front())
    stepFlops += opFlops(&op);
  base = hinted();
  if (mode != "none")
    minCut(base);
  findSegments();

  MLIRContext &ctx = getContext();
  width = ctx.isMultithreadingEnabled()
              ? std::clamp<size_t>(ctx.getThreadPool().getMaxConcurrency(), 1, 8)
              : 1;
  SmallVector<FailureOr<Measured>> first = measureAll({ValueSet(), base});
  FailureOr<Measured> before = first[0], chosen = first[1];
  if (failed(before) || failed(chosen))
    return signalPassFailure();
  Choice choice;
  choice.segments.assign(segments.size(), false);
  bool searchSegments =
      mode == "max" || (mode == "budget" && chosen->peak > budget);
  if (searchSegments) {
    int64_t smallest = chosen->peak;
    std::optional<int64_t> limit;
    if (mode == "budget")
      limit = static_cast<int64_t>(budget);
    auto found = search(mode == "max", limit, smallest);
    if (found && (mode == "budget" || found->second.peak < chosen->peak)) {
      choice = found->first;
      chosen = found->second;
    } else if (mode == "budget") {
      f.emitError() << "step-remat: no plan fits the budget of "
                    << static_cast<int64_t>(budget)
                    << " bytes: the smallest planned peak found is " << smallest
                    << " bytes (without recomputation: " << before->peak
                    << " bytes)";
      return signalPassFailure();
    }
  }
  Applied applied = apply(f, recomputeSet(choice), fwd);

  int64_t recomputedSegments = llvm::count(choice.segments, true);
  Builder b(f.getContext());
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  f->setAttr("step.remat",
             b.getDictionaryAttr({
                 b.getNamedAttr("mode", b.getStringAttr(mode)),
                 b.getNamedAttr("peak_before", i64(before->peak)),
                 b.getNamedAttr("peak_after", i64(chosen->peak)),
                 b.getNamedAttr("saved_bytes_before", i64(before->savedBytes)),
                 b.getNamedAttr("saved_bytes_after", i64(chosen->savedBytes)),
                 b.getNamedAttr("recomputed_ops", i64(applied.ops)),
                 b.getNamedAttr("recomputed_flops", i64(applied.flops)),
                 b.getNamedAttr("step_flops", i64(stepFlops)),
                 b.getNamedAttr("segments", i64(segments.size())),
                 b.getNamedAttr("segments_recomputed", i64(recomputedSegments)),
                 b.getNamedAttr("group", i64(choice.group)),
             }));
}

} // namespace
} // namespace mlir::step
