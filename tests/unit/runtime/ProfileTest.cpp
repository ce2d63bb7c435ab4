//===- ProfileTest.cpp - Step costs, labels, traces and profiles ----------===//
//
// A hand-built plan x[4,3] @ w[3,5] -> tanh -> reshape (a view); bytes
// and FLOPs below are worked out from those shapes.
//
//===----------------------------------------------------------------------===//

#include "runtime/Profile.h"

#include <gtest/gtest.h>

using namespace step::rt;

namespace {
Plan smallPlan() {
  Plan p;
  p.function = "train_step";
  auto buffer = [&](const char *name, BufferKind kind, Shape shape,
                    int64_t offset) {
    BufferDesc b;
    b.name = name;
    b.kind = kind;
    b.shape = shape;
    b.offset = offset;
    p.buffers.push_back(b);
  };
  buffer("x", BufferKind::Input, {4, 3}, -1);
  buffer("w", BufferKind::Param, {3, 5}, -1);
  buffer("%2", BufferKind::Transient, {4, 5}, 0);
  buffer("%3", BufferKind::Transient, {4, 5}, 256);
  buffer("%4", BufferKind::Transient, {20}, 256);
  PlanStep mm{"step.matmul", nlohmann::json::object(), {0, 1}, {2}, "", "m.mlir:3:8", nullptr};
  mm.flops = 120;
  PlanStep tanh{"step.tanh", nlohmann::json::object(), {2}, {3}, "tanh_k1", "", nullptr};
  tanh.flops = 20;
  PlanStep view{"step.reshape", nlohmann::json::object(), {3}, {4}, "", "", nullptr};
  p.steps = {mm, tanh, view};
  p.arguments = {0, 1};
  p.results = {4};
  p.resultNames = {"loss"};
  p.arenaBytes = 512;
  return p;
}

RunTimeline run(const Plan &p, double t0) {
  RunTimeline r;
  r.plan = &p;
  r.start = t0;
  r.spans = {{0, Lane::Compute, t0, t0 + 0.002},
             {1, Lane::Compute, t0 + 0.002, t0 + 0.003},
             {2, Lane::Compute, t0 + 0.003, t0 + 0.003}};
  r.end = t0 + 0.004;
  return r;
}
} // namespace

TEST(Profile, CostsAndLabelsOfSteps) {
  Plan p = smallPlan();
  StepCost mm = stepCost(p, p.steps[0]);
  EXPECT_EQ(mm.bytesRead, (12 + 15) * 4);
  EXPECT_EQ(mm.bytesWritten, 20 * 4);
  EXPECT_EQ(mm.flops, 120);
  StepCost view = stepCost(p, p.steps[2]);
  EXPECT_EQ(view.bytesRead + view.bytesWritten, 0); // moves nothing
  EXPECT_EQ(stepLabel(p, p.steps[0]), "matmul#0");
  EXPECT_EQ(stepLabel(p, p.steps[1]), "tanh_k1");
  EXPECT_STREQ(stepCategory(p, p.steps[0]), "matmul");
  EXPECT_STREQ(stepCategory(p, p.steps[1]), "kernel");
  EXPECT_STREQ(stepCategory(p, p.steps[2]), "view");
}

TEST(Profile, TraceHasRunsStepsAndLaneNames) {
  Plan p = smallPlan();
  ChromeTrace trace;
  trace.addSpan("read batch", "input", Lane::Input, 9.999, 10.0);
  trace.addRun(1, run(p, 10.0), /*withSteps=*/false);
  // The second run starts 6 ms after the first ended: idle 6 of 14 ms.
  trace.addRun(2, run(p, 10.010), /*withSteps=*/true);
  EXPECT_NEAR(trace.idleBetweenRuns(), 6.0 / 14.0, 1e-9);
  nlohmann::json j = trace.toJson();
  std::vector<nlohmann::json> complete;
  std::map<int, std::string> lanes;
  for (const auto &e : j["traceEvents"]) {
    if (e["ph"] == "X")
      complete.push_back(e);
    else if (e["name"] == "thread_name")
      lanes[e["tid"].get<int>()] = e["args"]["name"];
  }
  // read batch, step 1, step 2 and step 2's three ops.
  ASSERT_EQ(complete.size(), 6u);
  EXPECT_EQ(complete[0]["name"], "read batch");
  EXPECT_DOUBLE_EQ(complete[0]["ts"].get<double>(), 0.0); // the origin
  EXPECT_EQ(lanes[complete[0]["tid"].get<int>()], "input");
  EXPECT_EQ(complete[2]["name"], "step 2");
  EXPECT_NEAR(complete[2]["ts"].get<double>(), 11000.0, 1e-3); // us
  EXPECT_NEAR(complete[2]["dur"].get<double>(), 4000.0, 1e-3);
  const nlohmann::json &mm = complete[3];
  EXPECT_EQ(mm["name"], "matmul#0");
  EXPECT_EQ(mm["cat"], "matmul");
  EXPECT_EQ(lanes[mm["tid"].get<int>()], "compute");
  EXPECT_EQ(mm["args"]["flops"], 120);
  EXPECT_EQ(mm["args"]["bytes_read"], 108);
  EXPECT_EQ(mm["args"]["location"], "m.mlir:3:8");
  EXPECT_EQ(complete[4]["args"]["kernel"], "tanh_k1");
}

TEST(Profile, KernelsSummedOverRunsSlowestFirst) {
  Plan p = smallPlan();
  std::vector<KernelProfile> rows = profileKernels({run(p, 1.0), run(p, 2.0)});
  // The view is left out.
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, "matmul#0");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_NEAR(rows[0].seconds, 0.004, 1e-12);
  EXPECT_EQ(rows[0].bytes, 2 * (108 + 80));
  EXPECT_EQ(rows[0].flops, 240);
  EXPECT_EQ(rows[1].label, "tanh_k1");
  DevicePeaks peaks;
  peaks.device = "test";
  peaks.bytesPerSecond = 1e6; // 376 B / 4 ms = 94 KB/s: 9.4% of it
  std::string table = profileTable(rows, 1, peaks);
  EXPECT_NE(table.find("matmul#0"), std::string::npos) << table;
  EXPECT_NE(table.find("9.4%"), std::string::npos) << table;
  EXPECT_NE(table.find("(1 more kernels)"), std::string::npos) << table;
  EXPECT_EQ(table.find("tanh_k1"), std::string::npos) << table;
}
