//===- TensorParallelTest.cpp - step-tensor-parallel + step-shard tp ----===//
//
// The differential test of tensor parallelism: the step built with
// --shard=tp:T on N ranks (N / T data-parallel groups), run on N threads
// by the interpreter and by the CPU backend, each rank with its part of the
// split params and its group's rows of the global batch, equals one
// process on the global batch after two updates (losses, params and
// optimizer state, within 1e-5 normwise; 2e-4 under AdamW, see below);
// replicated results have the same
// bits on every rank. Also: which params the pass splits, and its errors.
//
//===----------------------------------------------------------------------===//

#include "ShardTestUtil.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

namespace {
using namespace step;
using namespace step::test;

/// [dim, groups] of argument `i` split by tensor parallelism, or empty.
std::vector<int64_t> splitOf(FuncOp f, unsigned i) {
  auto a = f.getArgAttrOfType<mlir::DenseI64ArrayAttr>(i, "step.tp_split");
  if (!a)
    return {};
  return {a.asArrayRef()[0], a.asArrayRef()[1]};
}

struct TpCase {
  std::string name;
  Model (*model)(int64_t batch);
  int64_t globalBatch, tp, world;
  /// AdamW (lr 1e-2) instead of SGD with momentum. Its bound is 2e-4: the
  /// keys' bias of attention has an exactly zero gradient (softmax ignores
  /// a constant added to every score of a row), so what the rounding of
  /// reordered sums leaves there, Adam turns into steps of about lr whose
  /// sign is noise (measured 5.1e-5 on c_attn.bias; every other tensor
  /// within 1e-5).
  bool adamw = false;
  /// Params the pass must split (all others stay whole).
  std::set<std::string> split;
  /// The rest of the pipeline around tensor parallelism (both runs).
  void (*tweak)(TrainOptions &) = nullptr;
  /// Bound of the comparison; 0: 2e-4 with AdamW, else 1e-5.
  double bound = 0;
};
void PrintTo(const TpCase &c, std::ostream *os) { *os << c.name; }

class TpDiff : public testing::TestWithParam<TpCase> {};

TEST_P(TpDiff, MatchesOneProcess) {
  const TpCase &c = GetParam();
  const int64_t n = c.world, t = c.tp, groups = n / t, B = c.globalBatch;
  Model global = c.model(B), local = c.model(B / groups);
  auto ctx = makeContext();
  TrainOptions plain = sgdOptions(),
               sharded = sgdOptions("tp:" + std::to_string(t), n);
  if (c.adamw)
    for (TrainOptions *o : {&plain, &sharded})
      o->optimizer = OptimizerOptions::parse("adamw,lr=1e-2,wd=0.1");
  if (c.tweak)
    for (TrainOptions *o : {&plain, &sharded})
      c.tweak(*o);
  const double bound = c.bound > 0 ? c.bound : c.adamw ? 2e-4 : 1e-5;
  BuiltStep want = buildStep(ctx.get(), global, plain);
  ASSERT_TRUE(want.module) << want.errors;
  BuiltStep got = buildStep(ctx.get(), local, sharded);
  ASSERT_TRUE(got.module) << got.errors;
  FuncOp f = want.step(), g = got.step();
  auto shard = g->getAttrOfType<mlir::DictionaryAttr>("step.shard");
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard.getAs<mlir::StringAttr>("mode").getValue(), "tp");
  EXPECT_EQ(BuiltStep::intOf(shard, "tp"), t);

  // The split params are the expected ones, their slots split alike, and
  // the local type is the full one with the split dim divided by tp.
  ASSERT_EQ(f.getNumArguments(), g.getNumArguments());
  std::set<std::string> split;
  int64_t splitSlots = 0;
  for (unsigned i = 0; i < g.getNumArguments(); ++i) {
    std::string name = argumentName(g, i);
    SCOPED_TRACE(name);
    Shape full = zerosOf(f.getArgumentTypes()[i]).shape();
    Shape mine = zerosOf(g.getArgumentTypes()[i]).shape();
    std::vector<int64_t> s = splitOf(g, i);
    if (kindOf(g, i) == "input") {
      full[0] /= groups;
      EXPECT_EQ(mine, full);
      continue;
    }
    if (s.empty()) {
      EXPECT_EQ(mine, full);
      continue;
    }
    full[static_cast<size_t>(s[0])] /= t;
    EXPECT_EQ(mine, full);
    if (kindOf(g, i) == "param")
      split.insert(name);
    else
      ++splitSlots;
  }
  EXPECT_EQ(split, c.split);
  EXPECT_EQ(splitSlots,
            static_cast<int64_t>(c.split.size()) * (c.adamw ? 2 : 1));

  std::map<std::string, HostTensor> inputs = globalInputs(f, global.classes);
  // Rank r = d * t + i: part i of split params, group d's rows.
  auto rankArgs = [&](int64_t r) {
    std::vector<HostTensor> args;
    for (unsigned i = 0; i < g.getNumArguments(); ++i) {
      std::string name = argumentName(g, i), kind = kindOf(g, i);
      std::vector<int64_t> s = splitOf(g, i);
      if (kind == "param" && !s.empty())
        args.push_back(
            rt::tpSliceOf(local.params.at(name), s[0], s[1], r % t, t));
      else if (kind == "param")
        args.push_back(local.params.at(name));
      else if (kind == "input")
        args.push_back(rowsOf(inputs.at(name), r / t, groups));
      else
        args.push_back(zerosOf(g.getArgumentTypes()[i]));
    }
    return args;
  };
  std::vector<HostTensor> wantArgs;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    std::string name = argumentName(f, i), kind = kindOf(f, i);
    wantArgs.push_back(kind == "param"   ? global.params.at(name)
                       : kind == "input" ? inputs.at(name)
                                         : zerosOf(f.getArgumentTypes()[i]));
  }
  std::map<std::string, unsigned> wantResult, argOf;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    wantResult[resultName(f, r)] = r;
  for (unsigned i = 0; i < g.getNumArguments(); ++i)
    argOf[argumentName(g, i)] = i;
  auto ranks = rt::makeThreadGroup(static_cast<int>(n));

  auto compareRuns = [&](const std::string &what, const StepRunner &wantRun,
                         const RankRunner &rankRun) {
    SCOPED_TRACE(what);
    std::vector<HostTensor> w0 = wantArgs;
    std::vector<std::vector<HostTensor>> args;
    for (int64_t r = 0; r < n; ++r)
      args.push_back(rankArgs(r));
    for (int update = 0; update < 2; ++update) {
      SCOPED_TRACE("update " + std::to_string(update));
      std::vector<HostTensor> w = wantRun(w0);
      ASSERT_FALSE(w.empty());
      std::vector<std::vector<HostTensor>> out(static_cast<size_t>(n));
      onRanks(ranks, [&](int r) {
        out[static_cast<size_t>(r)] = rankRun(r, args[static_cast<size_t>(r)]);
      });
      int64_t compared = 0;
      for (unsigned k = 0; k < g.getNumResults(); ++k) {
        std::string name = resultName(g, k);
        SCOPED_TRACE(name);
        if (name != "loss" && !argOf.count(name))
          continue; // per-rank outputs
        ASSERT_TRUE(wantResult.count(name));
        const HostTensor &expected = w[wantResult[name]];
        std::vector<int64_t> s =
            name == "loss" ? std::vector<int64_t>{} : splitOf(g, argOf[name]);
        HostTensor value;
        if (!s.empty()) {
          // Data-parallel replicas hold the same parts.
          for (int64_t r = t; r < n; ++r)
            EXPECT_TRUE(out[static_cast<size_t>(r)][k].bitwiseEqual(
                out[static_cast<size_t>(r % t)][k]))
                << "rank " << r << " differs from rank " << r % t;
          std::vector<HostTensor> parts;
          for (int64_t r = 0; r < t; ++r)
            parts.push_back(out[static_cast<size_t>(r)][k]);
          value = rt::tpUnslice(parts, s[0], s[1]);
        } else {
          for (int64_t r = 1; r < n; ++r)
            EXPECT_TRUE(out[0][k].bitwiseEqual(out[static_cast<size_t>(r)][k]))
                << "rank " << r << " differs from rank 0";
          value = out[0][k];
        }
        EXPECT_TRUE(closeTo(expected, value, bound));
        ++compared;
      }
      EXPECT_EQ(compared,
                static_cast<int64_t>(f.getNumArguments() - inputs.size() + 1));
      w0 = nextArgs(f, w0, w);
      for (int64_t r = 0; r < n; ++r)
        args[static_cast<size_t>(r)] =
            nextArgs(g, args[static_cast<size_t>(r)], out[static_cast<size_t>(r)]);
    }
  };
  compareOnInterpreterAndCpu(ctx.get(), want, got, n, compareRuns);
}

std::set<std::string> gpt2Split(int layers) {
  std::set<std::string> s;
  for (int l = 0; l < layers; ++l)
    for (const char *p :
         {"attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight"})
      s.insert("h." + std::to_string(l) + "." + p);
  return s;
}

std::vector<TpCase> tpCases() {
  // The MLP's first pair (w1, b1 by columns, w2 by rows); w3 feeds the
  // loss and stays whole.
  std::set<std::string> mlp{"fc1.weight", "fc1.bias", "fc2.weight"};
  return {
      {"MLP_tp2", mlpAt, 8, 2, 2, false, mlp},
      {"MLP_tp4", mlpAt, 8, 4, 4, false, mlp},
      {"MLP_dp2_tp2", mlpAt, 8, 2, 4, true, mlp},
      {"GPT2_tp2", gpt2At, 4, 2, 2, false, gpt2Split(2)},
      {"GPT2_dp2_tp2", gpt2At, 4, 2, 4, false, gpt2Split(2)},
      {"GPT2_tp2_adamw", gpt2At, 4, 2, 2, true, gpt2Split(2)},
      // The passes around tensor parallelism. Accumulation: the
      // collectives run once per update, on the accumulated gradients.
      {"MLP_dp2_tp2_GradAccum2", mlpAt, 8, 2, 4, false, mlp,
       [](TrainOptions &t) { t.gradAccum = 2; }},
      {"GPT2_tp2_GradAccum2", gpt2At, 4, 2, 2, false, gpt2Split(2),
       [](TrainOptions &t) { t.gradAccum = 2; }},
      // Recomputation and offloading run after the split, on rank-local
      // shapes: the same numbers.
      {"GPT2_tp2_RematMax", gpt2At, 4, 2, 2, false, gpt2Split(2),
       [](TrainOptions &t) { t.remat.mode = "max"; }},
      {"GPT2_tp2_OffloadAll", gpt2At, 4, 2, 2, false, gpt2Split(2),
       [](TrainOptions &t) { t.offload = OffloadOptions::parse("all"); }},
      // ZeRO-Offload: each rank's (split) params and state on the host.
      {"GPT2_dp2_tp2_OffloadOptimizer", gpt2At, 4, 2, 4, true, gpt2Split(2),
       [](TrainOptions &t) { t.offloadOptimizer = true; }},
      // Mixed precision: the casts come after the split, so each rank's
      // half-precision partial products are summed by the all_reduce; the
      // bound tells a right sum from a wrong one (as ShardDiff's Bf16).
      // fp16's dynamic loss scale takes the minimum of check_finite over
      // the group, so every rank skips or applies an update alike.
      {"MLP_tp2_Bf16", mlpAt, 8, 2, 2, false, mlp,
       [](TrainOptions &t) { t.amp = AmpOptions::parse("bf16", "", "auto"); },
       1e-2},
      {"GPT2_dp2_tp2_Fp16", gpt2At, 4, 2, 4, false, gpt2Split(2),
       [](TrainOptions &t) {
         t.amp = AmpOptions::parse("fp16", "", "dynamic,init=1024");
       },
       1e-2},
  };
}

INSTANTIATE_TEST_SUITE_P(Models, TpDiff, testing::ValuesIn(tpCases()),
                         [](const auto &info) { return info.param.name; });

TEST(TensorParallel, OptionErrors) {
  for (auto [spec, world, message] :
       {std::tuple<const char *, int64_t, const char *>{
            "tp:0", 2, "T >= 1"},
        {"tp:x", 2, "tp:T"},
        {"tp:3", 4, "multiple of 3"}}) {
    try {
      ShardOptions::parse(spec, world);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const std::invalid_argument &e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << e.what();
    }
  }
}

TEST(TensorParallel, NoPairIsAnError) {
  // A model whose only matmul feeds the loss: nothing to split.
  trace::Graph graph(3);
  trace::Tensor x = graph.input("x", {4, 3});
  trace::Tensor w = graph.param("w", {3, 2}, trace::init::uniform(-1, 1));
  graph.output(trace::mean(trace::matmul(x, w)));
  Model m{graph.mlir(), graph.initialParams(), 1};
  auto ctx = makeContext();
  BuiltStep got = buildStep(ctx.get(), m, sgdOptions("tp:2", 2));
  EXPECT_FALSE(got.module);
  EXPECT_NE(got.errors.find("found no matmul pair"), std::string::npos)
      << got.errors;
}

} // namespace
