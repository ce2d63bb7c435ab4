//===- SessionTest.cpp - The host API over hand-built training steps ------===//
//
// Most tests train the linear model of sgdStep() (PlanTestUtil.h), small
// enough to follow by hand. Expected values follow from
// torch.optim.SGD(lr=0.1, momentum=0.9): buf_1 = g, buf_k = 0.9 buf + g.
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"

#include "PlanTestUtil.h"
#include "TestUtil.h"
#include "runtime/Npy.h"

#include <filesystem>

namespace step::rt::test {
namespace {
namespace fs = std::filesystem;

TEST(Session, StepsTrainAndKeepState) {
  Session s(sgdStep());
  EXPECT_EQ(s.backend(), Backend::Cpu);
  EXPECT_EQ(s.paramNames(), std::vector<std::string>{"w"});
  EXPECT_EQ(s.stateNames(), (std::vector<std::string>{"w.momentum", "step"}));
  EXPECT_EQ(s.inputNames(), std::vector<std::string>{"x"});
  s.set("w", make(F32, {3}, {1, 1, 1}));
  // g = [5, 7, 9]; loss = sum(x * w).
  EXPECT_DOUBLE_EQ(s.step({{"x", batchX()}}), 21.0);
  expectValues(s.get("w"), F32, {3}, {0.5, 0.3, 0.1});
  expectValues(s.get("w.momentum"), F32, {3}, {5, 7, 9});
  expectExact(s.get("step"), I64, {}, {1});
  expectExact(s.get("loss"), F32, {}, {21});
  // buf = 0.9 * g + g = 1.9 g; w -= 0.1 * buf.
  EXPECT_NEAR(s.step({{"x", batchX()}}), 5 * 0.5 + 7 * 0.3 + 9 * 0.1, 1e-5);
  expectValues(s.get("w.momentum"), F32, {3}, {9.5, 13.3, 17.1});
  expectValues(s.get("w"), F32, {3}, {-0.45, -1.03, -1.61});
  expectExact(s.get("step"), I64, {}, {2});
}

TEST(Session, LoadSaveRoundTripAndStateZeroFill) {
  TempDir dir;
  fs::create_directories(dir / "in");
  writeNpy(dir / "in/w.npy", make(F32, {3}, {1, 1, 1}));
  std::string path = dir / "sgd.step";
  writeArtifact(path, sgdStep());

  Session s(path);
  s.load_params(dir / "in");
  // No state files: zeros, as PyTorch's optimizer state before step 1.
  expectExact(s.get("w.momentum"), F32, {3}, {0, 0, 0});
  expectExact(s.get("step"), I64, {}, {0});
  s.step({{"x", batchX()}});
  s.save_params(dir / "out");
  for (const char *name : {"w", "w.momentum", "step"})
    EXPECT_TRUE(readNpy(dir / (std::string("out/") + name + ".npy"))
                    .bitwiseEqual(s.get(name)))
        << name;

  // A second session resumes from the saved state and matches the first.
  Session resumed(path);
  resumed.load_params(dir / "out");
  double a = s.step({{"x", batchX()}});
  double b = resumed.step({{"x", batchX()}});
  EXPECT_EQ(a, b);
  EXPECT_TRUE(s.get("w").bitwiseEqual(resumed.get("w")));
  EXPECT_TRUE(s.get("step").bitwiseEqual(resumed.get("step")));
}

TEST(Session, LoadErrorsChangeNothing) {
  TempDir dir;
  Session s(sgdStep());
  s.set("w", make(F32, {3}, {1, 2, 3}));
  EXPECT_ERROR(s.load_params(dir / "nope"), {"is not a folder"});
  EXPECT_ERROR(s.load_params(dir.path.string()),
               {"missing param 'w'", "w.npy"});
  writeNpy(dir / "w.npy", make(F32, {3}, {7, 7, 7}));
  writeNpy(dir / "w.momentum.npy", make(F32, {4}, {1, 2, 3, 4}));
  EXPECT_ERROR(s.load_params(dir.path.string()),
               {"w.momentum.npy", "state 'w.momentum'",
                "expects f32 [3], found f32 [4]"});
  // w.npy was fine, but the load failed as a whole: nothing changed.
  expectExact(s.get("w"), F32, {3}, {1, 2, 3});
  expectExact(s.get("w.momentum"), F32, {3}, {0, 0, 0});
  writeNpy(dir / "w.npy", make(I64, {3}, {1, 2, 3}));
  EXPECT_ERROR(s.load_params(dir.path.string()),
               {"param 'w'", "expects f32 [3], found i64 [3]"});
}

TEST(Session, FailedStepLeavesParamsUnchanged) {
  // The step squares w, then looks rows of it up by index: an index out of
  // range fails after the new w has been computed.
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {2});
  int64_t idx = p.argument("idx", BufferKind::Input, I64, {1});
  int64_t w2 = p.transient(F32, {2}, 0);
  int64_t table = p.transient(F32, {2, 1}, 8);
  int64_t e = p.transient(F32, {1, 1}, 16);
  int64_t loss = p.transient(F32, {}, 20);
  p.step("step.mul", {}, {w, w}, {w2});
  p.step("step.reshape", {}, {w2}, {table});
  p.step("step.embedding", {}, {idx, table}, {e});
  p.step("step.reduce_sum", {{"dims", {0, 1}}}, {e}, {loss});
  p.result(loss, "loss");
  p.result(w2, "w");
  Session s(p.artifact);
  s.set("w", make(F32, {2}, {2, 3}));
  EXPECT_ERROR(s.step({{"idx", make(I64, {1}, {5})}}),
               {"plan step 2 (step.embedding)"});
  expectExact(s.get("w"), F32, {2}, {2, 3});
  EXPECT_ERROR(s.step({{"idx", make(I64, {2}, {0, 1})}}),
               {"input 'idx' expects i64 [1], found i64 [2]"});
  EXPECT_ERROR(s.step({}), {"the batch has no input 'idx'"});
  EXPECT_ERROR(s.step({{"idx", make(I64, {1}, {0})}, {"y", HostTensor()}}),
               {"the batch has 'y', which is not an input"});
  expectExact(s.get("w"), F32, {2}, {2, 3});
  EXPECT_DOUBLE_EQ(s.step({{"idx", make(I64, {1}, {1})}}), 9.0);
  expectExact(s.get("w"), F32, {2}, {4, 9});
}

TEST(Session, ParamsNeedValues) {
  TempDir dir;
  Session s(sgdStep());
  EXPECT_ERROR(s.step({{"x", batchX()}}), {"param 'w' has no value"});
  EXPECT_ERROR(s.save_params(dir / "out"), {"param 'w' has no value"});
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_ERROR(s.get("w"), {"'w' has no value yet"});
  EXPECT_ERROR(s.get("nope"), {"no param, state or result named 'nope'"});
  EXPECT_ERROR(s.set("w", HostTensor(F32, {4})),
               {"param 'w' expects f32 [3], found f32 [4]"});
  EXPECT_ERROR(s.set("x", batchX()), {"'x' is an input"});
  EXPECT_ERROR(s.set("v", batchX()), {"'v' is not an argument of the step"});
}

TEST(Session, CudaIsRefusedClearly) {
  SessionOptions cuda;
  cuda.backend = Backend::Cuda;
  // Without a driver or device the backend is refused with the reason; on
  // a GPU this hand-built plan (no kernels) is refused too. Both end by
  // pointing to the CPU backend.
  EXPECT_ERROR(Session(sgdStep(), cuda), {"use --backend=cpu"});
  SessionOptions cpu;
  cpu.backend = Backend::Cpu;
  EXPECT_EQ(Session(sgdStep(), cpu).backend(), Backend::Cpu);
  EXPECT_EQ(backendFromName("cuda"), Backend::Cuda);
  EXPECT_ERROR(backendFromName("tpu"), {"unknown backend 'tpu'"});
}

TEST(Session, RejectsInconsistentPlans) {
  Artifact a = sgdStep();
  a.plan.resultNames[1] = "x"; // a result replacing an input
  EXPECT_ERROR(Session{a}, {"result 1 is named after input 'x'"});
  a = sgdStep();
  a.plan.buffers[a.plan.arguments[2]].name = "w"; // two arguments named w
  EXPECT_ERROR(Session{a}, {"two arguments are named 'w'"});
  EXPECT_ERROR(Session("/nonexistent/model.step"), {"/nonexistent/model.step"});
}

} // namespace
} // namespace step::rt::test
