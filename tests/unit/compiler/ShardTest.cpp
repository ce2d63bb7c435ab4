//===- ShardTest.cpp - step-shard: N replicas equal one process ----------===//
//
// The differential test of data parallelism and ZeRO-1/2/3
// (passes/Shard.cpp): a model traced for the per-rank batch and sharded
// (dp, zero1, zero2, zero3 on 2 and 4 ranks) runs on N threads, each on its
// rows of the global batch, next to the same model traced for the global
// batch, unsharded; both on the interpreter, then both on the CPU backend.
// Two updates of SGD with momentum, clipped to 0.5; the loss, the params
// and the optimizer state (the ranks' blocks unsharded) must agree within
// 1e-5 normwise: the ranks add the same per-sample gradients in another
// order, so bits may differ, and SGD is linear in the gradient. Every
// rank's loss and replicated tensors must have the same bits. Besides the
// MLP and the tiny GPT-2: gradient buckets, params smaller than the world,
// a rank-0 param, and the passes around step-shard (AdamW, schedules,
// gradient accumulation, bf16/fp16 with an overflow on one rank, remat,
// offload, no fusion); the signature's blocks and the step.shard byte
// counts against ZeRO's factors. The communicators and kernels are tested
// in tests/unit/runtime/CommTest.cpp, errors and Sessions in
// ShardSessionTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "ShardTestUtil.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

namespace {
using namespace step;
using namespace step::test;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

std::optional<Shape> fullShapeOf(mlir::DenseI64ArrayAttr a) {
  if (!a)
    return std::nullopt;
  return Shape(a.asArrayRef().begin(), a.asArrayRef().end());
}
std::optional<Shape> argFullShape(FuncOp f, unsigned i) {
  return fullShapeOf(
      f.getArgAttrOfType<mlir::DenseI64ArrayAttr>(i, "step.full_shape"));
}
std::optional<Shape> resultFullShape(FuncOp f, unsigned r) {
  return fullShapeOf(
      f.getResultAttrOfType<mlir::DenseI64ArrayAttr>(r, "step.full_shape"));
}

/// Rank r's first arguments of `f` (a step for `n` ranks): params (their
/// block where sharded), zero state of the argument's (block) type, and
/// its rows of the global inputs.
std::vector<HostTensor>
rankArgs(FuncOp f, const std::map<std::string, HostTensor> &params,
         const std::map<std::string, HostTensor> &inputs, int64_t r,
         int64_t n) {
  std::vector<HostTensor> args;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    std::string name = argumentName(f, i), kind = kindOf(f, i);
    if (kind == "param") {
      const HostTensor &full = params.at(name);
      if (auto shape = argFullShape(f, i)) {
        EXPECT_EQ(*shape, full.shape()) << name;
        args.push_back(rt::shardOf(full, r, n));
      } else {
        args.push_back(full);
      }
    } else if (kind == "input") {
      args.push_back(rowsOf(inputs.at(name), r, n));
    } else {
      args.push_back(zerosOf(f.getArgumentTypes()[i]));
    }
    HostTensor want = zerosOf(f.getArgumentTypes()[i]);
    EXPECT_EQ(args.back().shape(), want.shape()) << name;
    EXPECT_EQ(args.back().dtype(), want.dtype()) << name;
  }
  return args;
}

/// Whether two name -> tensor maps hold the same names and bits.
void expectSameParams(const std::map<std::string, HostTensor> &a,
                      const std::map<std::string, HostTensor> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name;
    EXPECT_TRUE(t.bitwiseEqual(it->second)) << name;
  }
}

/// A regression with params smaller than the world (a [3] `w`, a [1]
/// `bias`, and a `scale` of shape `scaleShape`: {} for a rank-0 param, as a
/// learnable temperature): on 4 ranks some blocks hold padding only.
/// Inputs x [batch, 3], y [batch].
Model regressionAt(int64_t batch, const Shape &scaleShape) {
  using namespace step::trace;
  Graph g(11);
  Tensor x = g.input("x", {batch, 3});
  Tensor y = g.input("y", {batch});
  Tensor scale = g.param("scale", scaleShape, init::constant(0.75));
  Tensor w = g.param("w", {3}, init::uniform(-1, 1));
  Tensor bias = g.param("bias", {1}, init::constant(0.25));
  Tensor pred = sum(x * w, {1}) * scale + bias;
  Tensor d = pred - y;
  g.output(mean(d * d));
  return {g.mlir(), g.initialParams(), 1};
}
Model smallParamsAt(int64_t batch) { return regressionAt(batch, {1}); }
Model scalarParamAt(int64_t batch) { return regressionAt(batch, {}); }

//===----------------------------------------------------------------------===//
// The pass: N ranks on their rows == one process on the whole batch
//===----------------------------------------------------------------------===//

struct ShardCase {
  std::string name;
  Model (*model)(int64_t batch);
  int64_t globalBatch;
  std::string spec; ///< --shard
  int64_t world;
  bool clip = true; ///< clip to 0.5 (else no clipping)
  /// Gradient collectives expected: one bucket for all (the default 25 MiB
  /// holds these models' gradients), one per gradient, or several.
  enum Buckets { One, PerGradient, Several } buckets = One;
  /// Changes to both steps' options (optimizer, accumulation, ...).
  void (*tweak)(TrainOptions &) = nullptr;
  double bound = 1e-5;
  /// The float inputs of the last rank's rows times this (1e4 with fp16:
  /// that rank's gradients overflow, so every rank must skip the update).
  double lastRowsScale = 1;
};
void PrintTo(const ShardCase &c, std::ostream *os) { *os << c.name; }

class ShardDiff : public testing::TestWithParam<ShardCase> {};

TEST_P(ShardDiff, MatchesOneProcess) {
  const ShardCase &c = GetParam();
  const int64_t n = c.world, B = c.globalBatch;
  ASSERT_EQ(B % n, 0);
  Model global = c.model(B), local = c.model(B / n);
  // Traced at two batch sizes from one seed: the same params.
  expectSameParams(global.params, local.params);
  auto ctx = makeContext();
  TrainOptions plain = sgdOptions(), sharded = sgdOptions(c.spec, n);
  if (!c.clip)
    plain.clipNorm.reset(), sharded.clipNorm.reset();
  if (c.tweak)
    c.tweak(plain), c.tweak(sharded);
  const std::string mode = sharded.shard.mode;
  BuiltStep want = buildStep(ctx.get(), global, plain);
  ASSERT_TRUE(want.module) << want.errors;
  BuiltStep got = buildStep(ctx.get(), local, sharded);
  ASSERT_TRUE(got.module) << got.errors;
  FuncOp f = want.step(), g = got.step();
  ASSERT_FALSE(f->hasAttr("step.shard"));
  auto shard = g->getAttrOfType<mlir::DictionaryAttr>("step.shard");
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard.getAs<mlir::StringAttr>("mode").getValue().str(), mode);
  EXPECT_EQ(BuiltStep::intOf(shard, "world_size"), n);

  // The signature: the same arguments by name; state (zero1-3) and params
  // (zero3) are blocks of ceil(numel / n) elements of their full shape.
  ASSERT_EQ(f.getNumArguments(), g.getNumArguments());
  int64_t shardedState = 0;
  for (unsigned i = 0; i < g.getNumArguments(); ++i) {
    std::string name = argumentName(g, i), kind = kindOf(g, i);
    SCOPED_TRACE(name);
    ASSERT_EQ(name, argumentName(f, i));
    HostTensor full = zerosOf(f.getArgumentTypes()[i]);
    HostTensor mine = zerosOf(g.getArgumentTypes()[i]);
    std::optional<Shape> fullShape = argFullShape(g, i);
    // An optimizer slot: opt.<slot>.<param> (not opt.step, amp.*).
    bool slot = false;
    for (const auto &p : global.params)
      slot =
          slot || (name.rfind("opt.", 0) == 0 && name.size() > p.first.size() &&
                   name.compare(name.size() - p.first.size() - 1,
                                std::string::npos, "." + p.first) == 0);
    EXPECT_EQ(slot, kind == "state" && name.rfind("opt.", 0) == 0 &&
                        name != "opt.step");
    bool blocks =
        (kind == "param" && mode == "zero3") || (slot && mode != "dp");
    ASSERT_EQ(fullShape.has_value(), blocks);
    if (blocks) {
      EXPECT_EQ(*fullShape, full.shape());
      EXPECT_EQ(mine.shape(), (Shape{(full.numel() + n - 1) / n}));
      shardedState += kind == "state";
    } else if (kind == "input") {
      Shape rows = full.shape();
      rows[0] /= n;
      EXPECT_EQ(mine.shape(), rows);
    } else {
      EXPECT_EQ(mine.shape(), full.shape());
    }
  }
  if (mode != "dp") {
    // Every slot of every param (SGD with momentum: 1, AdamW: 2).
    int64_t slots =
        sharded.optimizer.kind == OptimizerOptions::Kind::Adamw ? 2 : 1;
    EXPECT_EQ(shardedState, slots * static_cast<int64_t>(global.params.size()));
  }
  // The step.shard figures: ZeRO's per-rank bytes, from the params (all
  // f32; one slot per param for SGD with momentum, two for AdamW; opt.step
  // is 8 bytes and stays whole).
  if (!c.tweak || sharded.optimizer.kind == OptimizerOptions::Kind::Adamw) {
    int64_t full = 0, blockBytes = 0;
    for (const auto &[name, t] : global.params) {
      full += 4 * t.numel();
      blockBytes += 4 * ((t.numel() + n - 1) / n);
    }
    int64_t slots =
        sharded.optimizer.kind == OptimizerOptions::Kind::Adamw ? 2 : 1;
    bool zero = mode != "dp";
    bool scatter = mode == "zero2" || mode == "zero3";
    EXPECT_EQ(BuiltStep::intOf(shard, "params_bytes_full"), full);
    EXPECT_EQ(BuiltStep::intOf(shard, "grads_bytes_full"), full);
    EXPECT_EQ(BuiltStep::intOf(shard, "state_bytes_full"), slots * full + 8);
    EXPECT_EQ(BuiltStep::intOf(shard, "params_bytes"),
              mode == "zero3" ? blockBytes : full);
    EXPECT_EQ(BuiltStep::intOf(shard, "grads_bytes"),
              scatter ? blockBytes : full);
    EXPECT_EQ(BuiltStep::intOf(shard, "state_bytes"),
              slots * (zero ? blockBytes : full) + 8);
  }
  // The gradients' collectives (mean): all_reduce for dp and zero1 (one
  // more for the loss), reduce_scatter for zero2 and zero3.
  int64_t collectives = 0;
  bool scatter = mode == "zero2" || mode == "zero3";
  g.walk([&](mlir::Operation *op) {
    auto reduce = op->getAttrOfType<mlir::StringAttr>("reduce");
    if (reduce && reduce.getValue() == "mean" &&
        op->getName().getStringRef() ==
            (scatter ? "step.reduce_scatter" : "step.all_reduce"))
      ++collectives;
  });
  if (!scatter)
    --collectives; // the loss
  auto params = static_cast<int64_t>(global.params.size());
  if (c.buckets == ShardCase::One)
    EXPECT_EQ(collectives, 1);
  else if (c.buckets == ShardCase::PerGradient)
    EXPECT_EQ(collectives, params);
  else
    EXPECT_TRUE(collectives > 1 && collectives < params)
        << collectives << " gradient collectives for " << params << " params";

  std::map<std::string, HostTensor> inputs = globalInputs(f, global.classes);
  if (c.lastRowsScale != 1)
    for (auto &[name, t] : inputs)
      if (rt::isFloat(t.dtype()))
        for (int64_t k = t.numel() / n * (n - 1); k < t.numel(); ++k)
          t.setFromDouble(k, t.getAsDouble(k) * c.lastRowsScale);
  auto ranks = rt::makeThreadGroup(static_cast<int>(n));
  std::map<std::string, unsigned> wantResult;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    wantResult[resultName(f, r)] = r;

  /// Two updates: `want` on the global batch, `rank` on each rank's rows
  /// (on its own thread, its communicator installed), compared.
  auto compareRuns = [&](const std::string &what, const StepRunner &wantRun,
                         const RankRunner &rankRun) {
    SCOPED_TRACE(what);
    std::vector<HostTensor> wantArgs = rankArgs(f, global.params, inputs, 0, 1);
    std::vector<std::vector<HostTensor>> args(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r)
      args[static_cast<size_t>(r)] = rankArgs(g, local.params, inputs, r, n);
    for (int update = 0; update < 2; ++update) {
      SCOPED_TRACE("update " + std::to_string(update));
      std::vector<HostTensor> w = wantRun(wantArgs);
      ASSERT_FALSE(w.empty());
      if (c.lastRowsScale != 1) {
        // The overflow is real: one process skips the update.
        for (unsigned k = 1; k < f.getNumResults(); ++k)
          for (unsigned i = 0; i < f.getNumArguments(); ++i) {
            if (kindOf(f, i) == "param" &&
                argumentName(f, i) == resultName(f, k)) {
              EXPECT_TRUE(w[k].bitwiseEqual(wantArgs[i]))
                  << resultName(f, k) << " changed";
            }
          }
      } else {
        ASSERT_TRUE(std::isfinite(w[0].getAsDouble(0)));
      }
      std::vector<std::vector<HostTensor>> out(static_cast<size_t>(n));
      onRanks(ranks, [&](int r) {
        out[static_cast<size_t>(r)] = rankRun(r, args[static_cast<size_t>(r)]);
      });
      for (const auto &o : out)
        ASSERT_EQ(o.size(), g.getNumResults());

      // Every param and state result, and the loss, against one process;
      // per-rank outputs (the MLP's logits) are the rank's rows of the
      // global ones.
      int64_t compared = 0;
      for (unsigned k = 0; k < g.getNumResults(); ++k) {
        std::string name = resultName(g, k);
        SCOPED_TRACE(name);
        ASSERT_TRUE(wantResult.count(name));
        const HostTensor &expected = w[wantResult[name]];
        bool replaces = name == "loss";
        for (unsigned i = 0; i < g.getNumArguments(); ++i)
          replaces = replaces || argumentName(g, i) == name;
        if (!replaces) {
          for (int64_t r = 0; r < n; ++r)
            EXPECT_TRUE(closeTo(rowsOf(expected, r, n),
                                out[static_cast<size_t>(r)][k], c.bound))
                << "rank " << r;
          continue;
        }
        HostTensor value;
        if (std::optional<Shape> shape = resultFullShape(g, k)) {
          EXPECT_EQ(*shape, expected.shape());
          std::vector<HostTensor> blocks;
          for (const auto &o : out)
            blocks.push_back(o[k]);
          value = rt::unshard(blocks, *shape);
        } else {
          // Replicated: the same bits on every rank.
          for (int64_t r = 1; r < n; ++r)
            EXPECT_TRUE(out[0][k].bitwiseEqual(out[static_cast<size_t>(r)][k]))
                << "rank " << r << " differs from rank 0";
          value = out[0][k];
        }
        EXPECT_TRUE(closeTo(expected, value, c.bound));
        ++compared;
      }
      // The loss, every param and every state tensor.
      EXPECT_EQ(compared,
                static_cast<int64_t>(f.getNumArguments() - inputs.size() + 1));
      wantArgs = nextArgs(f, wantArgs, w);
      for (int64_t r = 0; r < n; ++r)
        args[static_cast<size_t>(r)] = nextArgs(g, args[static_cast<size_t>(r)],
                                                out[static_cast<size_t>(r)]);
    }
  };
  compareOnInterpreterAndCpu(ctx.get(), want, got, n, compareRuns);
}

const char *const kModes[] = {"dp", "zero1", "zero2", "zero3"};

std::vector<ShardCase> shardCases() {
  std::vector<ShardCase> cases;
  auto add = [&](const std::string &name, Model (*model)(int64_t),
                 const std::string &spec, int64_t world) -> ShardCase & {
    bool gpt2 = model == gpt2At;
    cases.push_back({name, model, gpt2 ? 4 : 8, spec, world});
    return cases.back();
  };
  // Every mode on 2 and 4 ranks: SGD with momentum, clipped to 0.5.
  for (int64_t world : {2, 4})
    for (const char *m : kModes) {
      std::string suffix = std::string("_") + m + "_" + std::to_string(world);
      add("MLP" + suffix, mlpAt, m, world);
      add("GPT2" + suffix, gpt2At, m, world);
    }
  // One collective per gradient instead of one bucket for all, and small
  // buckets (several per step).
  add("MLP_zero2_NoBucket_2", mlpAt, "zero2,bucket=0", 2).buckets =
      ShardCase::PerGradient;
  add("GPT2_dp_NoBucket_2", gpt2At, "dp,bucket=0", 2).buckets =
      ShardCase::PerGradient;
  add("GPT2_zero1_NoBucket_4", gpt2At, "zero1,bucket=0", 4).buckets =
      ShardCase::PerGradient;
  add("GPT2_zero3_NoBucket_4", gpt2At, "zero3,bucket=0", 4).buckets =
      ShardCase::PerGradient;
  add("GPT2_zero2_Bucket4KiB_2", gpt2At, "zero2,bucket=4KiB", 2).buckets =
      ShardCase::Several;
  add("GPT2_dp_Bucket4KiB_4", gpt2At, "dp,bucket=4KiB", 4).buckets =
      ShardCase::Several;
  // Without clipping the update scales with the gradient: a gradient
  // summed instead of averaged shows.
  add("MLP_dp_NoClip_2", mlpAt, "dp", 2).clip = false;
  add("MLP_zero3_NoClip_4", mlpAt, "zero3", 4).clip = false;
  add("GPT2_zero2_NoClip_2", gpt2At, "zero2", 2).clip = false;
  // Params of fewer elements than ranks (blocks of padding only), a world
  // of one, and a rank-0 param.
  for (const char *m : kModes) {
    add(std::string("Small_") + m + "_4", smallParamsAt, m, 4).clip = false;
    add(std::string("ScalarParam_") + m + "_2", scalarParamAt, m, 2);
  }
  add("Small_zero3_NoBucket_4", smallParamsAt, "zero3,bucket=0", 4).buckets =
      ShardCase::PerGradient;
  add("Small_zero2_World1", smallParamsAt, "zero2", 1);

  // The rest of the pipeline around step-shard, every mode on 2 ranks
  // (4 where noted).
  struct Variant {
    const char *name;
    void (*tweak)(TrainOptions &);
    bool mlp, gpt2;
    double bound;
    int64_t world = 2;
  };
  const Variant variants[] = {
      // AdamW, weight decay on matrices only (decided before sharding).
      // Adam divides each gradient element by its own RMS, so GPT-2's
      // near-zero gradients amplify the reordering (measured 3.6e-5).
      {"AdamW",
       [](TrainOptions &t) {
         t.optimizer =
             OptimizerOptions::parse("adamw,lr=1e-2,wd=0.1,wd_vectors=false");
       },
       true, true, 1e-4},
      {"Nesterov",
       [](TrainOptions &t) {
         t.optimizer = OptimizerOptions::parse(
             "sgd,lr=0.1,momentum=0.9,nesterov=1,wd=0.01");
       },
       false, true, 1e-5},
      {"Cosine",
       [](TrainOptions &t) {
         t.schedule = ScheduleOptions::parse("cosine,warmup=1,total=4");
       },
       true, false, 1e-5, 4},
      {"GradAccum2", [](TrainOptions &t) { t.gradAccum = 2; }, true, true,
       1e-5},
      // Mixed precision: each rank's weight gradients are rounded to
      // bf16/fp16 before the mean (2^-8 / 2^-11 relative), so the bound
      // only tells a correct mean from a wrong one (measured 3.9e-3 bf16,
      // 1.1e-3 fp16).
      {"Bf16",
       [](TrainOptions &t) { t.amp = AmpOptions::parse("bf16", "", "auto"); },
       true, false, 1e-2},
      {"Fp16",
       [](TrainOptions &t) {
         t.amp = AmpOptions::parse("fp16", "", "dynamic,init=1024");
       },
       true, true, 1e-2},
      {"RematMax", [](TrainOptions &t) { t.remat.mode = "max"; }, false, true,
       1e-5, 4},
      {"RematAuto", [](TrainOptions &t) { t.remat.mode = "auto"; }, false, true,
       1e-5},
      {"OffloadAll",
       [](TrainOptions &t) { t.offload = OffloadOptions::parse("all"); }, false,
       true, 1e-5},
      {"NoFuse", [](TrainOptions &t) { t.fuse = false; }, false, true, 1e-5},
      // ZeRO-Offload: each rank's (shard of the) update on the host; AdamW
      // as above, so the same bound.
      {"OffloadOptimizer",
       [](TrainOptions &t) {
         t.optimizer = OptimizerOptions::parse("adamw,lr=1e-2");
         t.offloadOptimizer = true;
       },
       true, true, 1e-4},
  };
  for (const Variant &v : variants)
    for (const char *m : kModes) {
      std::string suffix =
          std::string("_") + v.name + "_" + m + "_" + std::to_string(v.world);
      for (bool gpt2 : {false, true}) {
        if (gpt2 ? !v.gpt2 : !v.mlp)
          continue;
        ShardCase &c = add((gpt2 ? "GPT2" : "MLP") + suffix,
                           gpt2 ? gpt2At : mlpAt, m, v.world);
        c.tweak = v.tweak;
        c.bound = v.bound;
      }
    }
  // fp16 gradients that overflow on the last rank only: check_finite is
  // all-reduced, so every rank skips the update, as one process does.
  for (const char *m : kModes) {
    ShardCase &c =
        add(std::string("MLP_Fp16OverflowOnOneRank_") + m + "_2", mlpAt, m, 2);
    c.tweak = [](TrainOptions &t) {
      t.amp = AmpOptions::parse("fp16", "", "dynamic,init=1024");
    };
    c.lastRowsScale = 1e4;
    c.bound = 1e-2;
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, ShardDiff, testing::ValuesIn(shardCases()),
                         [](const testing::TestParamInfo<ShardCase> &info) {
                           return info.param.name;
                         });


} // namespace
