//===- BlockOrderTest.cpp - positions that follow a block's edits ---------===//
//
// passes/BlockOrder.h against the block itself: after every insertion,
// move and erasure (seeded random edits, and long runs of insertions at
// one spot that use up the gaps and force renumbering), the positions of
// consecutive ops must increase along the block and stay positive.
//
//===----------------------------------------------------------------------===//

#include "passes/BlockOrder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using mlir::Operation;
using mlir::step::BlockOrder;

class BlockOrderTest : public ::testing::Test {
protected:
  BlockOrderTest() : builder(&ctx) {
    ctx.allowUnregisteredDialects();
    ctx.loadDialect<mlir::func::FuncDialect>();
    module = mlir::ModuleOp::create(builder.getUnknownLoc());
    auto f = builder.create<mlir::func::FuncOp>(
        builder.getUnknownLoc(), "f", builder.getFunctionType({}, {}));
    module.push_back(f);
    block = new mlir::Block();
    f.getBody().push_back(block);
  }
  ~BlockOrderTest() override { module->erase(); }

  /// A new op (no operands, no results) just before `at` (null: the end).
  Operation *insert(Operation *at) {
    mlir::OperationState state(builder.getUnknownLoc(), "test.op");
    Operation *op = Operation::create(state);
    block->getOperations().insert(
        at ? mlir::Block::iterator(at) : block->end(), op);
    return op;
  }

  /// Fails at the first pair of neighbours out of order.
  ::testing::AssertionResult agrees(const BlockOrder &order) {
    Operation *prev = nullptr;
    for (Operation &op : *block) {
      if (order[&op] <= 0)
        return ::testing::AssertionFailure()
               << "position " << order[&op] << " is not positive";
      if (prev && !order.before(prev, &op))
        return ::testing::AssertionFailure()
               << "positions " << order[prev] << " then " << order[&op];
      prev = &op;
    }
    return ::testing::AssertionSuccess();
  }

  std::vector<Operation *> ops() {
    std::vector<Operation *> out;
    for (Operation &op : *block)
      out.push_back(&op);
    return out;
  }

  mlir::MLIRContext ctx;
  mlir::OpBuilder builder;
  mlir::ModuleOp module;
  mlir::Block *block;
};

TEST_F(BlockOrderTest, RandomInsertionsMovesAndErasures) {
  for (int i = 0; i < 20; ++i)
    insert(nullptr);
  BlockOrder order(*block);
  ASSERT_TRUE(agrees(order));
  std::mt19937 rng(7);
  int inserted = 0, moved = 0, erased = 0;
  for (int step = 0; step < 3000; ++step) {
    std::vector<Operation *> all = ops();
    auto pick = [&] { return all[rng() % all.size()]; };
    switch (rng() % 4) {
    case 0: // insert before an op, or at the front or the end
    case 1: {
      int where = static_cast<int>(rng() % 8);
      Operation *at = where == 0   ? &block->front()
                      : where == 1 ? nullptr
                                   : pick();
      order.place(insert(at));
      ++inserted;
      break;
    }
    case 2: { // move an op before or after another
      Operation *op = pick(), *to = pick();
      if (op == to)
        continue;
      if (rng() % 2)
        op->moveBefore(to);
      else
        op->moveAfter(to);
      order.place(op);
      ++moved;
      break;
    }
    default: // erase one, keeping at least two
      if (all.size() > 2) {
        Operation *op = pick();
        order.forget(op);
        op->erase();
        ++erased;
      }
    }
    ASSERT_TRUE(agrees(order)) << "after edit " << step;
  }
  EXPECT_GT(inserted, 1000);
  EXPECT_GT(moved, 500);
  EXPECT_GT(erased, 500);
}

// 200 ops inserted one after another right before the same op, then 200
// at the front: each halves the gap left there, so the gaps run out
// (after 32) and the block is renumbered, more than once.
TEST_F(BlockOrderTest, InsertionsAtOneSpotRenumber) {
  Operation *a = insert(nullptr);
  Operation *b = insert(nullptr);
  BlockOrder order(*block);
  for (int i = 0; i < 200; ++i) {
    order.place(insert(b));
    ASSERT_TRUE(agrees(order)) << "after insertion " << i;
  }
  for (int i = 0; i < 200; ++i) {
    order.place(insert(&block->front()));
    ASSERT_TRUE(agrees(order)) << "after front insertion " << i;
  }
  EXPECT_TRUE(order.before(a, b));
  EXPECT_EQ(block->getOperations().size(), 402u);
}

} // namespace
