//===- OverlapTest.cpp - Collectives beside the compute steps -------------===//
//
// rt::collectiveSchedule (where each collective must be joined: reads of
// its result, writes over its operands' or results' bytes, views, the end)
// on hand-built plans, and the CPU executor running collectives on their
// own thread: results equal to values worked out by hand and bit-identical
// to collectives run in place, on thread and TCP groups; a failing
// collective names its step on every rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/cpu/Executor.h"

#include "CommTestUtil.h"
#include "PlanTestUtil.h"

#include <map>

namespace step::rt::test {
namespace {


nlohmann::json sumOver(int n) {
  std::vector<int64_t> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(r);
  return {{"reduce", "sum"}, {"group_size", n}, {"replica_groups", ranks}};
}

nlohmann::json gatherOver(int n) {
  nlohmann::json j = sumOver(n);
  j.erase("reduce");
  return j;
}

/// x [4] in; a = x*x; r = all_reduce(a); c = x+x; d = c*c; e = r+d;
/// f = all_gather(e) [4n]; returns e and f. Transients are disjoint, so
/// all_reduce may run until step 4 (e reads r) and all_gather to the end.
Artifact overlapped(int n) {
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Input, F32, {4});
  int64_t a = p.transient(F32, {4}, 0), r = p.transient(F32, {4}, 16);
  int64_t c = p.transient(F32, {4}, 32), d = p.transient(F32, {4}, 48);
  int64_t e = p.transient(F32, {4}, 64);
  int64_t f = p.transient(F32, {4 * n}, 80);
  p.step("step.mul", {}, {x, x}, {a});
  p.step("step.all_reduce", sumOver(n), {a}, {r});
  p.step("step.add", {}, {x, x}, {c});
  p.step("step.mul", {}, {c, c}, {d});
  p.step("step.add", {}, {r, d}, {e});
  p.step("step.all_gather", gatherOver(n), {e}, {f});
  p.result(e, "e");
  p.result(f, "f");
  return p.artifact;
}

TEST(CollectiveSchedule, JoinsAtTheFirstReaderOrTheEnd) {
  Artifact a = overlapped(2);
  std::vector<CollectiveSpan> spans = collectiveSchedule(a.plan);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].step, 1);
  EXPECT_EQ(spans[0].waitBefore, 4); // e = r + d
  EXPECT_EQ(spans[1].step, 5);
  EXPECT_EQ(spans[1].waitBefore, 6); // a result: the end of the run
}

/// all_reduce(a @0) -> r @16, then `later` steps; the span's end.
int64_t joinWith(const std::function<void(PlanBuilder &, int64_t a,
                                          int64_t r, int64_t x)> &later) {
  PlanBuilder p;
  int64_t x = p.argument("x", BufferKind::Param, F32, {4});
  int64_t a = p.transient(F32, {4}, 0), r = p.transient(F32, {4}, 16);
  p.step("step.mul", {}, {x, x}, {a});
  p.step("step.all_reduce", sumOver(2), {a}, {r});
  later(p, a, r, x);
  p.result(r, "r");
  std::vector<CollectiveSpan> spans = collectiveSchedule(p.plan);
  EXPECT_EQ(spans.size(), 1u);
  return spans.empty() ? -1 : spans[0].waitBefore;
}

TEST(CollectiveSchedule, WaitsBeforeItsOperandIsOverwritten) {
  // Step 3 reuses a's bytes (a is dead after the all_reduce): on a GPU the
  // collective may still be reading them.
  EXPECT_EQ(joinWith([](PlanBuilder &p, int64_t, int64_t, int64_t x) {
              int64_t u = p.transient(F32, {4}, 32);
              int64_t v = p.transient(F32, {4}, 0);
              p.step("step.add", {}, {x, x}, {u});
              p.step("step.mul", {}, {u, x}, {v});
            }),
            3);
}

TEST(CollectiveSchedule, WaitsBeforeAStepTouchesItsResultBytes) {
  // A later buffer partly over r's bytes (written, then read).
  EXPECT_EQ(joinWith([](PlanBuilder &p, int64_t, int64_t, int64_t x) {
              int64_t u = p.transient(F32, {4}, 32);
              int64_t v = p.transient(F32, {2}, 24);
              p.step("step.add", {}, {x, x}, {u});
              p.step("step.slice", {{"start", {0}}, {"limit", {2}},
                                    {"strides", {1}}},
                     {x}, {v});
            }),
            3);
  // A view of r (a reshape at its offset) reads it.
  EXPECT_EQ(joinWith([](PlanBuilder &p, int64_t, int64_t r, int64_t x) {
              int64_t u = p.transient(F32, {4}, 32);
              int64_t v = p.transient(F32, {2, 2}, 16);
              p.step("step.add", {}, {x, x}, {u});
              p.step("step.reshape", {}, {r}, {v});
            }),
            3);
}

TEST(CollectiveSchedule, ReadsOfItsOperandAndOtherArenasAreNoHazard) {
  // Reading the operand again, and arguments (not in the arena), are fine.
  EXPECT_EQ(joinWith([](PlanBuilder &p, int64_t a, int64_t, int64_t x) {
              int64_t u = p.transient(F32, {4}, 32);
              int64_t v = p.transient(F32, {4}, 48);
              p.step("step.add", {}, {a, x}, {u});
              p.step("step.mul", {}, {x, x}, {v});
            }),
            4);
}

/// Runs overlapped(n) on `ranks` with overlap on or off; x of rank r is
/// [r+1, r+2, r+3, r+4]. Returns each rank's results.
std::vector<std::vector<HostTensor>>
runOn(const std::vector<std::unique_ptr<Communicator>> &ranks, bool overlap) {
  auto n = static_cast<int>(ranks.size());
  Artifact a = overlapped(n);
  std::vector<std::vector<HostTensor>> out(ranks.size());
  step::test::onRanks(ranks, [&](int r) {
    HostTensor x = make(F32, {4}, {r + 1.0, r + 2.0, r + 3.0, r + 4.0});
    cpu::ExecuteOptions o;
    o.overlapCollectives = overlap;
    out[static_cast<size_t>(r)] = cpu::execute(a, {&x}, o);
  });
  return out;
}

void expectOverlappedValues(const std::vector<std::vector<HostTensor>> &out) {
  auto n = static_cast<int>(out.size());
  // e_r[i] = sum over ranks q of (q+1+i)^2, plus (2 (r+1+i))^2.
  std::vector<double> all;
  for (int r = 0; r < n; ++r) {
    std::vector<double> e;
    for (int i = 0; i < 4; ++i) {
      double s = 0;
      for (int q = 0; q < n; ++q)
        s += (q + 1.0 + i) * (q + 1.0 + i);
      e.push_back(s + 4.0 * (r + 1.0 + i) * (r + 1.0 + i));
    }
    ASSERT_EQ(out[static_cast<size_t>(r)].size(), 2u);
    EXPECT_EQ(values(out[static_cast<size_t>(r)][0]), e) << "rank " << r;
    all.insert(all.end(), e.begin(), e.end());
  }
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(values(out[static_cast<size_t>(r)][1]), all) << "rank " << r;
}

class OverlapOn : public testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Kinds, OverlapOn, testing::Values("threads", "tcp"));

TEST_P(OverlapOn, EqualsInPlaceCollectives) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    auto ranks = GetParam() == "tcp" ? step::test::makeTcpGroup(n)
                                     : makeThreadGroup(n);
    auto async = runOn(ranks, true);
    auto inPlace = runOn(ranks, false);
    expectOverlappedValues(async);
    expectOverlappedValues(inPlace);
    for (size_t r = 0; r < async.size(); ++r)
      for (size_t i = 0; i < async[r].size(); ++i)
        EXPECT_EQ(async[r][i].raw() == nullptr
                      ? 0
                      : std::memcmp(async[r][i].raw(), inPlace[r][i].raw(),
                                    async[r][i].byteSize()),
                  0);
  }
}

// A timeline of the run (step-run --trace, docs/profiling.md): every step
// once; the collectives (plan steps 1 and 5) on the collective lane,
// overlapped or in place, the rest on the compute lane; all inside the run.
TEST(Overlap, TimelineHasEveryStepOnItsLane) {
  Artifact a = overlapped(2);
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlapped" : "in place");
    auto ranks = makeThreadGroup(2);
    std::vector<RunTimeline> timelines(2);
    step::test::onRanks(ranks, [&](int r) {
      HostTensor x = make(F32, {4}, {1, 2, 3, 4});
      cpu::ExecuteOptions o;
      o.overlapCollectives = overlap;
      o.timeline = &timelines[static_cast<size_t>(r)];
      cpu::execute(a, {&x}, o);
    });
    for (const RunTimeline &t : timelines) {
      EXPECT_EQ(t.plan, &a.plan);
      std::map<int64_t, Lane> lanes;
      for (const StepSpan &s : t.spans) {
        EXPECT_TRUE(lanes.emplace(s.index, s.lane).second) << s.index;
        EXPECT_LE(t.start, s.start);
        EXPECT_LE(s.start, s.end);
        EXPECT_LE(s.end, t.end);
      }
      ASSERT_EQ(lanes.size(), 6u);
      for (const auto &[index, lane] : lanes)
        EXPECT_EQ(lane, index == 1 || index == 5 ? Lane::Collective
                                                 : Lane::Compute)
            << "plan step " << index;
    }
  }
}

TEST(Overlap, AFailedCollectiveNamesItsStepOnEveryRank) {
  // Compiled for 3 replicas, run on 2: the collective thread throws, the
  // join rethrows with the step named; the rest of the plan stops.
  Artifact a = overlapped(3);
  auto ranks = makeThreadGroup(2);
  std::vector<std::string> errors(2);
  step::test::onRanks(ranks, [&](int r) {
    HostTensor x = make(F32, {4}, {1, 2, 3, 4});
    errors[static_cast<size_t>(r)] =
        step::test::errorOf([&] { cpu::execute(a, {&x}); });
  });
  for (const std::string &e : errors) {
    EXPECT_NE(e.find("plan step 1 (step.all_reduce): all_reduce: compiled "
                     "for 3 replicas, but this run has 2"),
              std::string::npos)
        << e;
  }
}

} // namespace
} // namespace step::rt::test
