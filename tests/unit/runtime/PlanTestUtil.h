//===- PlanTestUtil.h - Hand-built plans for the runtime tests --*- C++ -*-===//
//
// A small builder for rt::Plan, so executor and session tests can write a
// plan the way step-memory-plan would lay it out: buffers with arena offsets
// chosen by the test, steps with JSON attributes.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_UNIT_RUNTIME_PLANTESTUTIL_H
#define STEP_TESTS_UNIT_RUNTIME_PLANTESTUTIL_H

#include "runtime/Artifact.h"

#include "TestUtil.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace step::rt::test {

struct PlanBuilder {
  Artifact artifact;
  Plan &plan = artifact.plan;

  explicit PlanBuilder(std::string function = "train_step") {
    plan.function = std::move(function);
  }

  int64_t buffer(const std::string &name, BufferKind kind, DType dtype,
                 Shape shape, int64_t offset = -1) {
    BufferDesc b;
    b.name = name;
    b.kind = kind;
    b.dtype = dtype;
    b.shape = std::move(shape);
    b.offset = offset;
    plan.buffers.push_back(b);
    return static_cast<int64_t>(plan.buffers.size()) - 1;
  }
  /// An argument buffer (param, state or input), appended to plan.arguments.
  int64_t argument(const std::string &name, BufferKind kind, DType dtype,
                   Shape shape) {
    int64_t id = buffer(name, kind, dtype, std::move(shape));
    plan.arguments.push_back(id);
    return id;
  }
  /// A transient at `offset` in the arena; the arena grows to hold it.
  int64_t transient(DType dtype, Shape shape, int64_t offset) {
    int64_t id = buffer("%" + std::to_string(plan.buffers.size()),
                        BufferKind::Transient, dtype, std::move(shape), offset);
    plan.arenaBytes =
        std::max(plan.arenaBytes, offset + plan.buffers[id].bytes());
    return id;
  }
  /// A host buffer (a step.offload result) at `offset` in the host arena;
  /// the host arena grows to hold it.
  int64_t host(DType dtype, Shape shape, int64_t offset) {
    int64_t id = buffer("%" + std::to_string(plan.buffers.size()),
                        BufferKind::Host, dtype, std::move(shape), offset);
    plan.hostBytes = std::max(plan.hostBytes, offset + plan.buffers[id].bytes());
    return id;
  }
  /// A constant holding `t`, appended to the "constants" section at the
  /// next multiple of 16 bytes (the section starts with 16 bytes of padding
  /// so offsets are never trivially 0).
  int64_t constant(const HostTensor &t) {
    std::string &section = artifact.sections["constants"];
    section.resize((section.size() / 16 + 1) * 16, '\xAB');
    int64_t id = buffer("%" + std::to_string(plan.buffers.size()),
                        BufferKind::Constant, t.dtype(), t.shape(),
                        static_cast<int64_t>(section.size()));
    section.append(static_cast<const char *>(t.raw()), t.byteSize());
    return id;
  }
  void step(const std::string &op, nlohmann::json attrs,
            std::vector<int64_t> operands, std::vector<int64_t> results) {
    PlanStep s;
    s.op = op;
    s.attrs = attrs.is_null() ? nlohmann::json::object() : std::move(attrs);
    s.operands = std::move(operands);
    s.results = std::move(results);
    plan.steps.push_back(std::move(s));
  }
  void result(int64_t id, const std::string &name) {
    plan.results.push_back(id);
    plan.resultNames.push_back(name);
  }
};

/// A training step of a linear "model" with SGD + momentum:
///   loss = sum(x * broadcast(w)),  grad_w = sum_rows(x),
///   t = step + 1,  (w, buf) = sgd_update(w, grad_w, t, lr = 0.1, buf)
/// with w [3] a param, "w.momentum" [3] and "step" (i64) optimizer state and
/// x [2, 3] the input. The arena reuses dead transients' bytes.
inline Artifact sgdStep() {
  constexpr auto F32 = DType::F32;
  constexpr auto I64 = DType::I64;
  PlanBuilder p;
  int64_t w = p.argument("w", BufferKind::Param, F32, {3});
  int64_t buf = p.argument("w.momentum", BufferKind::State, F32, {3});
  int64_t step = p.argument("step", BufferKind::State, I64, {});
  int64_t x = p.argument("x", BufferKind::Input, F32, {2, 3});
  int64_t one = p.constant(make(I64, {}, {1}));
  int64_t lr = p.constant(make(F32, {}, {0.1}));
  int64_t t = p.transient(I64, {}, 0);
  int64_t wb = p.transient(F32, {2, 3}, 8);
  int64_t xw = p.transient(F32, {2, 3}, 32);
  int64_t loss = p.transient(F32, {}, 56);
  int64_t g = p.transient(F32, {3}, 8); // reuses wb's bytes: wb is dead
  int64_t w1 = p.transient(F32, {3}, 32), b1 = p.transient(F32, {3}, 64);
  p.step("step.add", {}, {step, one}, {t});
  p.step("step.broadcast_in_dim", {{"broadcast_dimensions", {1}}}, {w}, {wb});
  p.step("step.mul", {}, {x, wb}, {xw});
  p.step("step.reduce_sum", {{"dims", {0, 1}}}, {xw}, {loss});
  p.step("step.reduce_sum", {{"dims", {0}}}, {x}, {g});
  p.step("step.sgd_update", {{"momentum", 0.9}}, {w, g, t, lr, buf}, {w1, b1});
  p.result(loss, "loss");
  p.result(w1, "w");
  p.result(b1, "w.momentum");
  p.result(t, "step");
  return p.artifact;
}

/// A batch for sgdStep()'s input x.
inline HostTensor batchX() {
  return make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
}

/// A fresh folder under the test temp dir, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           ("step-test-" + std::to_string(::getpid()) + "-" + info->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string &name) const {
    return (path / name).string();
  }
};

} // namespace step::rt::test

#endif // STEP_TESTS_UNIT_RUNTIME_PLANTESTUTIL_H
