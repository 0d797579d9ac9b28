//===- OverlapAllReduces.cpp - work between an all-reduce's two halves ----===//
//
// A shard.all_reduce blocks its rank until every rank has contributed: the
// rank that arrives first waits for the slowest, and with MPI the exchange
// itself leaves the core idle. The backward of a column-split projection
// is the textbook case of work it need not wait for: its input gradient is
// all-reduced, while its weight gradient reads only local tensors
// (Megatron-LM's overlap of the input-gradient all-reduce with the weight
// gradient GEMM). This pass splits such an all-reduce into
// tp.all_reduce_start and tp.all_reduce_wait and orders the block so that
// the work the sum does not feed runs between them: the start goes right
// after what it reads (the side-effect-free ops it depends on move up,
// past the independent ones), the wait right before its first reader.
// Collectives stay where they are, and so does the order of every op with
// side effects; an all-reduce with nothing to overlap is left alone.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPOVERLAPALLREDUCES
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Whether `op` exchanges data between ranks as a collective the IR names:
/// the bounds no reordering crosses. (A kernel that communicates inside,
/// such as a vocabulary-parallel cross-entropy, may lie between a start and
/// its wait: the runtime completes the sum in flight first.)
bool isCollective(Operation *op) {
  return isa<shard::ShardDialect>(op->getDialect()) ||
         isa<AllReduceStartOp, AllReduceWaitOp>(op);
}

/// The ops of `range` (consecutive ops of one block, all before `reduce`)
/// that `reduce` reads through operands, in block order.
SmallVector<Operation *> sliceOf(shard::AllReduceOp reduce,
                                 ArrayRef<Operation *> range) {
  llvm::SmallPtrSet<Operation *, 16> inRange(range.begin(), range.end());
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Value> worklist(reduce->getOperands());
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && inRange.contains(def) && slice.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  SmallVector<Operation *> ordered;
  for (Operation *op : range)
    if (slice.contains(op))
      ordered.push_back(op);
  return ordered;
}

struct TPOverlapAllReduces
    : public tp::impl::TPOverlapAllReducesBase<TPOverlapAllReduces> {
  void runOnOperation() override {
    SmallVector<shard::AllReduceOp> reduces;
    getOperation().walk([&](shard::AllReduceOp op) { reduces.push_back(op); });
    for (shard::AllReduceOp reduce : reduces)
      overlap(reduce);
  }

  void overlap(shard::AllReduceOp reduce) {
    if (reduce.getReduction() != shard::ReductionKind::Sum ||
        !isa<FloatType>(getElementTypeOrSelf(reduce.getInput().getType())))
      return;
    Block *block = reduce->getBlock();
    // The ops since the last collective: where the start may move up to.
    SmallVector<Operation *> range;
    for (Operation *op = reduce->getPrevNode(); op && !isCollective(op);
         op = op->getPrevNode())
      range.push_back(op);
    std::reverse(range.begin(), range.end());
    // Ops with regions may read the slice's values inside them.
    if (llvm::any_of(range,
                     [](Operation *op) { return op->getNumRegions() != 0; }))
      return;
    SmallVector<Operation *> slice = sliceOf(reduce, range);
    llvm::SmallPtrSet<Operation *, 16> inSlice(slice.begin(), slice.end());
    SmallVector<Operation *> independent;
    for (Operation *op : range)
      if (!inSlice.contains(op))
        independent.push_back(op);
    // Moving the slice up reorders it only with independent ops; ops with
    // side effects keep their order among themselves.
    bool hoist =
        !independent.empty() && llvm::all_of(slice, isMemoryEffectFree);

    // The wait: before the first reader of the sum, or the next collective.
    Operation *waitPoint = block->getTerminator();
    for (Operation *op = reduce->getNextNode(); op; op = op->getNextNode()) {
      bool reads = llvm::any_of(reduce->getUsers(), [&](Operation *user) {
        return block->findAncestorOpInBlock(*user) == op;
      });
      if (reads || isCollective(op) || op->hasTrait<OpTrait::IsTerminator>()) {
        waitPoint = op;
        break;
      }
    }
    if (!hoist && waitPoint == reduce->getNextNode())
      return; // nothing to overlap

    Operation *startPoint = reduce;
    if (hoist) {
      startPoint = independent.front();
      for (Operation *op : slice)
        op->moveBefore(startPoint);
    }
    OpBuilder builder(startPoint);
    auto start = AllReduceStartOp::create(
        builder, reduce.getLoc(), reduce.getInput(), reduce.getGridAttr(),
        reduce.getGridAxesAttr());
    builder.setInsertionPoint(waitPoint);
    auto wait =
        AllReduceWaitOp::create(builder, reduce.getLoc(), start.getPending());
    inheritDecoderLayer(reduce, start);
    inheritDecoderLayer(reduce, wait);
    reduce.getResult().replaceAllUsesWith(wait.getResult());
    reduce->erase();
  }
};

} // namespace
