//===- PlanActivations.cpp - activations laid out in one arena ------------===//
//
// Every kernel allocating its own result costs an allocation per op and
// leaves the layout of memory to malloc. The compiler knows each value's
// lifetime, so it lays a function's activations out in one arena instead:
// results whose lifetimes do not overlap share bytes, and a call of the
// function takes one buffer. Shapes are dynamic in batch and sequence, but
// an activation [batch, seq, ...] is proportional to the tokens of the
// input, so the plan is in bytes per token and holds for any input.
//
// Only results the runtime can place (a call that takes a RuntimeArg::Slot)
// get a buffer. The runtime's kernels return new tensors, but a consuming
// form may return the operand it takes (it sums or adds in that storage),
// so such a result extends the lifetime of that operand's buffer. What the
// function returns keeps memory of its own. (No kernel keeps an operand
// after it returns, nor returns one otherwise: tprt.h's promise.)
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPInterfaces.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPPLANACTIVATIONS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Buffers start at multiples of a cache line per token, so at multiples of
/// a cache line for any number of tokens.
constexpr int64_t kAlignment = 64;

/// The bytes per token of a [?, ?, static...] tensor (batch, sequence,
/// features); nullopt for any other shape, whose size the tokens do not
/// bound.
std::optional<int64_t> bytesPerToken(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() < 2 || !tensor.isDynamicDim(0) ||
      !tensor.isDynamicDim(1))
    return std::nullopt;
  Type element = tensor.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  for (int64_t d : tensor.getShape().drop_front(2))
    if (ShapedType::isDynamic(d) || d < 0 || llvm::MulOverflow(bytes, d, bytes))
      return std::nullopt;
  return bytes;
}

/// The runtime call of `op`, when it names one.
std::optional<RuntimeCall> runtimeCallOf(Operation *op) {
  auto callable = dyn_cast<RuntimeCallOpInterface>(op);
  if (!callable)
    return std::nullopt;
  RuntimeCall call(op);
  if (failed(callable.buildRuntimeCall(call)) || !call.getSignature())
    return std::nullopt;
  return call;
}

/// The operands a result of `op` may share storage with: for a runtime
/// call, the operand its consuming form may take (every other result is a
/// new tensor: tprt.h's promise); all of them for anything else.
SmallVector<Value> mayAlias(Operation *op,
                            const std::optional<RuntimeCall> &call) {
  if (!call)
    return SmallVector<Value>(op->getOperands());
  SmallVector<Value> consumed;
  if (const RuntimeSignature *consuming = call->getSignature()->consuming)
    for (auto [arg, kind] : llvm::zip(call->getArgs(), consuming->params))
      if (kind == RuntimeArg::ConsumedTensor)
        if (auto *v = std::get_if<Value>(&arg); v && *v)
          consumed.push_back(*v);
  return consumed;
}

/// One result to place: its op, size, and the ops (by position) from its
/// definition to the last read of anything sharing its storage.
struct Buffer {
  Operation *op;
  int64_t bytes;
  unsigned begin, end;
  int64_t offset = -1;
};

struct TPPlanActivations
    : public tp::impl::TPPlanActivationsBase<TPPlanActivations> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    func->removeAttr(TPDialect::kActivationBytesAttrName);
    func->removeAttr(TPDialect::kActivationBuffersAttrName);
    func.walk([](Operation *op) {
      op->removeAttr(TPDialect::kActivationSlotAttrName);
    });
    // The arena is sized from the input ids at run time.
    if (func.isExternal() || !func.getBody().hasOneBlock() || !hasInputIds())
      return;
    Block &body = func.getBody().front();

    DenseMap<Operation *, unsigned> position;
    unsigned next = 0;
    llvm::EquivalenceClasses<Value> storage;
    DenseSet<Value> returned;
    SmallVector<Buffer> buffers;
    for (Operation &op : body) {
      // Straight-line code only: a region's reads are not ordered here.
      if (op.getNumRegions())
        return;
      position[&op] = next++;
      std::optional<RuntimeCall> call = runtimeCallOf(&op);
      for (Value result : op.getResults())
        storage.insert(result);
      for (Value operand : mayAlias(&op, call))
        for (Value result : op.getResults())
          storage.unionSets(result, operand);
      if (op.hasTrait<OpTrait::IsTerminator>())
        returned.insert(op.getOperands().begin(), op.getOperands().end());
      if (!call || !takesActivationSlot(*call->getSignature()) ||
          op.getNumResults() != 1)
        continue;
      if (std::optional<int64_t> bytes = bytesPerToken(op.getResultTypes()[0]))
        buffers.push_back({&op, *bytes, position[&op], position[&op]});
    }

    // Each class of values sharing storage: whether the function returns a
    // member, and the last op that reads a member.
    DenseMap<Value, std::pair<bool, unsigned>> classes;
    for (const auto *ec : storage) {
      if (!ec->isLeader())
        continue;
      bool escapes = false;
      unsigned last = 0;
      for (auto member = storage.member_begin(*ec);
           member != storage.member_end(); ++member) {
        escapes |= returned.contains(*member);
        for (Operation *user : member->getUsers())
          if (Operation *reader = body.findAncestorOpInBlock(*user))
            last = std::max(last, position.lookup(reader));
      }
      classes[ec->getData()] = {escapes, last};
    }
    llvm::erase_if(buffers, [&](Buffer &buffer) {
      auto [escapes, last] =
          classes.lookup(storage.getLeaderValue(buffer.op->getResult(0)));
      buffer.end = std::max(buffer.begin, last);
      return escapes;
    });
    if (buffers.empty())
      return;
    int64_t arena = assignOffsets(buffers);

    // One slot per distinct (offset, bytes): the repeated layers of a
    // loop then mostly name the same slots.
    Builder b(func.getContext());
    llvm::MapVector<std::pair<int64_t, int64_t>, int64_t> slots;
    for (Buffer &buffer : buffers) {
      auto [it, inserted] =
          slots.try_emplace({buffer.offset, buffer.bytes}, slots.size());
      buffer.op->setAttr(TPDialect::kActivationSlotAttrName,
                         b.getI64IntegerAttr(it->second));
    }
    SmallVector<int64_t> pairs;
    for (auto &[at, slot] : slots)
      pairs.append({at.first, at.second});
    func->setAttr(TPDialect::kActivationBytesAttrName,
                  b.getI64IntegerAttr(arena));
    func->setAttr(TPDialect::kActivationBuffersAttrName,
                  b.getDenseI64ArrayAttr(pairs));
  }

  bool hasInputIds() {
    func::FuncOp func = getOperation();
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto name = func.getArgAttrOfType<StringAttr>(
              i, onnx_ir::ONNXDialect::kNameAttrName);
          name && name.getValue() == "input_ids")
        return true;
    return false;
  }

  /// Greedy by size (largest first, each at the lowest aligned offset
  /// where it overlaps no placed buffer that is live at the same time):
  /// the arena's size.
  static int64_t assignOffsets(MutableArrayRef<Buffer> buffers) {
    SmallVector<Buffer *> order;
    for (Buffer &buffer : buffers)
      order.push_back(&buffer);
    llvm::stable_sort(order, [](const Buffer *a, const Buffer *b) {
      return a->bytes > b->bytes;
    });
    int64_t arena = 0;
    SmallVector<Buffer *> placed;
    for (Buffer *buffer : order) {
      SmallVector<std::pair<int64_t, int64_t>> taken;
      for (Buffer *other : placed)
        if (other->begin <= buffer->end && buffer->begin <= other->end)
          taken.push_back({other->offset, other->offset + other->bytes});
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [begin, end] : taken) {
        if (offset + buffer->bytes <= begin)
          break;
        offset = std::max<int64_t>(offset, llvm::alignTo(end, kAlignment));
      }
      buffer->offset = offset;
      arena = std::max(arena, offset + buffer->bytes);
      placed.push_back(buffer);
    }
    return static_cast<int64_t>(llvm::alignTo(arena, kAlignment));
  }
};

} // namespace
