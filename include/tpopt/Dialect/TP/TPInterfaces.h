//===- TPInterfaces.h - what each tp op says to the passes ------*- C++ -*-===//
//
// The op interfaces of TPInterfaces.td and the small classes their methods
// take: the partitioner's state (layouts of values, pending partial sums,
// collectives) and the description of a runtime call.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_TP_TPINTERFACES_H
#define TPOPT_DIALECT_TP_TPINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <variant>

namespace mlir::tp {

//===----------------------------------------------------------------------===//
// Partitioning
//===----------------------------------------------------------------------===//

/// How an activation is held by the ranks of the tensor-parallel grid.
enum class ShardLayout {
  Replicated,
  /// Split on the last dimension (heads, features).
  SplitLast,
  /// Split on dim 1, the sequence (sequence parallelism).
  SplitSequence,
  /// A partial sum not yet reduced: all-reduced when read whole,
  /// reduce-scattered by a split result annotation.
  Partial,
};

/// What tp-partition knows while it walks one function: the grid size, the
/// parameters' split dimensions, every activation's layout, and the
/// collectives already made. Ops read and update it from their
/// PartitionOpInterface::partition.
class PartitionState {
public:
  PartitionState(MLIRContext *ctx, int64_t ranks)
      : builder(ctx), ranks(ranks) {}

  int64_t getRanks() const { return ranks; }
  /// Positioned after the op being partitioned.
  OpBuilder &getBuilder() { return builder; }

  ShardLayout getLayout(Value v) const;
  void setLayout(Value v, ShardLayout layout) { layouts[v] = layout; }

  /// The dimension a parameter is split on; -1 when it is replicated or is
  /// not a parameter.
  int64_t getParamSplitDim(Value v) const;
  void setParamSplitDim(Value v, int64_t dim) { paramSplit[v] = dim; }

  /// An uneven split (tpc --allow-uneven) of a value's split dimension:
  /// rank r holds elements [starts[r], starts[r] + sizes[r]) in a block of
  /// the largest size whose tail is zeros.
  struct UnevenSplit {
    SmallVector<int64_t> starts, sizes;
    bool operator==(const UnevenSplit &other) const {
      return starts == other.starts && sizes == other.sizes;
    }
  };
  /// `v`'s uneven split; null when it is split evenly or not at all.
  const UnevenSplit *getUneven(Value v) const;
  void setUneven(Value v, UnevenSplit split) { uneven[v] = std::move(split); }
  /// Whether `a` and `b` are split alike: both evenly (or not at all), or
  /// over the same ranges.
  bool splitAlike(Value a, Value b) const;

  /// `result` takes the local type and the layout of `from` (ops that act
  /// per element or per token), and its split when `from` is a parameter.
  void propagate(Value from, Value result);

  /// `v` is a partial sum: it stays pending when read once (its reader may
  /// add another partial or scale it); one read several times is completed
  /// at once and its readers share the all-reduce.
  void markPartial(Value v);
  /// The all-reduce that completes partial sum `v`, made once, right after
  /// `v`'s producer.
  Value completed(Value v);

  /// `type` with dimension `dim` cut to one rank's block (or multiplied back
  /// by the ranks when `gather`); a static size that does not divide is an
  /// error reported on `op`.
  FailureOr<RankedTensorType> resized(Operation *op, Type type, int64_t dim,
                                      bool gather) const;
  /// All ranks' blocks of `v` along `dim`, concatenated (at the builder's
  /// insertion point).
  FailureOr<Value> gathered(Operation *op, Value v, int64_t dim);
  /// `gathered` made once, right after `v`'s producer, for every reader
  /// that needs `v` whole (the parts of a fused projection).
  FailureOr<Value> gatheredOnce(Operation *op, Value v, int64_t dim);
  /// This rank's block of replicated `v` along `dim` (no communication);
  /// with `split`, its range in a padded block.
  FailureOr<Value> sliced(Operation *op, Value v, int64_t dim,
                          const UnevenSplit *split = nullptr);
  /// The reduce-scatter of partial sum `v` along `dim`; with `split`, over
  /// its ranges (which must follow one another) into padded blocks.
  FailureOr<Value> reduceScattered(Operation *op, Value v, int64_t dim,
                                   const UnevenSplit *split = nullptr);

private:
  Value allReduce(Location loc, Value v);
  /// The grid every collective runs on, @tp.
  FlatSymbolRefAttr gridRef() {
    return FlatSymbolRefAttr::get(builder.getContext(), "tp");
  }

  OpBuilder builder;
  int64_t ranks;
  llvm::DenseMap<Value, ShardLayout> layouts;
  llvm::DenseMap<Value, int64_t> paramSplit;
  llvm::DenseMap<Value, UnevenSplit> uneven;
  /// Partial sums and their all-reduce.
  llvm::DenseMap<Value, Value> allReduced;
  /// Values split on their last dimension and their one all-gather.
  llvm::DenseMap<Value, Value> gatheredWhole;
};

//===----------------------------------------------------------------------===//
// Runtime calls
//===----------------------------------------------------------------------===//

/// The C++ type of one parameter of a runtime function (after the
/// `tprt::Context &` every call takes first).
enum class RuntimeArg {
  /// `const tprt::Tensor &`, an operand of the op.
  Tensor,
  /// `const tprt::Tensor &`, an optional operand (`tprt::Tensor()` if absent).
  OptionalTensor,
  /// `tprt::Tensor &`, an operand the call is the last reader of: the callee
  /// takes it (the caller's variable is left empty) and may reuse its
  /// storage. Only in a signature's consuming form, one parameter.
  ConsumedTensor,
  /// `int64_t`, `int`, `double`, `bool`.
  I64,
  I32,
  F64,
  Bool,
  /// `uint64_t` (byte offsets and lengths).
  U64,
  /// `const char *` (a string literal).
  CString,
  /// `tprt::DType`.
  DType,
  /// `tprt::LinearForm` and `tprt::LinearEpilogue` (the linear family's
  /// form and epilogue).
  LinearForm,
  LinearEpilogue,
  /// `std::vector<int64_t>` (a shape).
  Shape,
  /// `std::vector<double>` (per-frequency factors).
  Reals,
  /// `std::vector<std::string>` (a table of names: a bucket's FQNs).
  Strings,
  /// `int64_t`, the buffer of the entry function's activation plan the
  /// result goes in (the op's `tp.activation_slot` from
  /// tp-plan-activations; -1: none). A signature's last parameter; the
  /// emitter supplies it, not the op's buildRuntimeCall. A signature with
  /// a consuming form takes it in both or in neither (the emitter swaps
  /// only the callee).
  Slot,
};

/// The C++ parameter type of `kind`, as tprt.h declares it.
StringRef getRuntimeArgCppType(RuntimeArg kind);

/// RuntimeSignature::results of a function that returns `tprt::Tensors`,
/// one per result of the op, however many the op has.
inline constexpr unsigned kVariadicResults = ~0u;

/// One runtime function: its qualified name, its parameters, and how many
/// tensors it returns: a `tprt::Tensor` for one, `tprt::Tensors` (one per
/// result of the op) for several or kVariadicResults, nothing (`void`) for
/// none. `consuming`,
/// when set, is the same function with one tensor parameter a
/// ConsumedTensor: `tp-to-emitc` calls it instead when the call is that
/// tensor's last reader.
struct RuntimeSignature {
  StringLiteral callee;
  ArrayRef<RuntimeArg> params;
  unsigned results = 1;
  const RuntimeSignature *consuming = nullptr;
};

/// Whether `signature`'s function takes the buffer its result goes in
/// (a last RuntimeArg::Slot): then the result is a new tensor, never one
/// of its operands or a view of one, and the call keeps no operand.
bool takesActivationSlot(const RuntimeSignature &signature);

/// The C++ return type of `signature`, as tprt.h declares it.
StringRef getRuntimeReturnCppType(const RuntimeSignature &signature);

/// A call an op asks for: one of its signatures and one argument per
/// parameter, checked against the signature when the call is emitted.
class RuntimeCall {
public:
  using Arg = std::variant<Value, int64_t, double, bool, std::string,
                           SmallVector<int64_t>, SmallVector<double>,
                           SmallVector<std::string>>;

  explicit RuntimeCall(Operation *op) : op(op) {}

  RuntimeCall &callee(const RuntimeSignature &signature) {
    this->signature = &signature;
    return *this;
  }
  /// A tensor operand of the op; null for an absent optional operand.
  RuntimeCall &tensor(Value v) { return push(v); }
  RuntimeCall &i64(int64_t v) { return push(v); }
  RuntimeCall &f64(double v) { return push(v); }
  RuntimeCall &flag(bool v) { return push(v); }
  /// A string (quoted and escaped when emitted) or a dtype name.
  RuntimeCall &str(StringRef v) { return push(v.str()); }
  /// An enumerator of the runtime's, by its C++ name
  /// ("tprt::LinearForm::Bmm"), for a DType, LinearForm or LinearEpilogue
  /// parameter.
  RuntimeCall &enumerator(StringRef cppName) { return push(cppName.str()); }
  RuntimeCall &shape(ArrayRef<int64_t> v) {
    return push(SmallVector<int64_t>(v));
  }
  RuntimeCall &reals(ArrayRef<double> v) {
    return push(SmallVector<double>(v));
  }
  /// A table of strings (each quoted and escaped when emitted).
  RuntimeCall &strings(ArrayRef<std::string> v) {
    return push(SmallVector<std::string>(v));
  }

  Operation *getOp() const { return op; }
  const RuntimeSignature *getSignature() const { return signature; }
  ArrayRef<Arg> getArgs() const { return args; }

  /// The arguments match the signature's parameters in number and kind;
  /// otherwise an error on the op.
  LogicalResult verify() const;

private:
  RuntimeCall &push(Arg arg) {
    args.push_back(std::move(arg));
    return *this;
  }

  Operation *op;
  const RuntimeSignature *signature = nullptr;
  SmallVector<Arg> args;
};

/// tprt::load_param, which the entry function calls for each parameter.
const RuntimeSignature &getLoadParamSignature();

/// Attaches RuntimeCallOpInterface to the shard collectives (all_reduce,
/// all_gather, reduce_scatter) when the shard dialect loads.
void registerShardRuntimeCallModels(DialectRegistry &registry);

/// Every runtime function the registered ops of `ctx` can call (load
/// dialects first), and tprt::load_param.
SmallVector<RuntimeSignature> getAllRuntimeSignatures(MLIRContext *ctx);

} // namespace mlir::tp

#include "tpopt/Dialect/TP/TPInterfaces.h.inc"

#endif // TPOPT_DIALECT_TP_TPINTERFACES_H
