//===- TPToEmitC.cpp - tp ops to calls into the tprt runtime --------------===//
//
// A dialect conversion: tensors become `tprt::Tensor` values, every op with
// a RuntimeCallOpInterface (tp ops, shard collectives) becomes the
// `emitc.call_opaque` it describes, and the entry function becomes
// `tprt_model_forward(ctx, input_ids, attention_mask)`, which loads each
// parameter with tprt::load_param. What cannot be lowered is diagnosed
// before anything is rewritten.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "CppLiterals.h"
#include "LayerLoops.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include "tprt/Fingerprint.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPTOEMITC
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// `s` with `"` and `\` escaped and every byte outside printable ASCII as a
/// three-digit octal escape: safe in a C++ string literal, and in a `//`
/// comment (no newline, no line-splicing backslash).
std::string escaped(StringRef s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) {
      if (c == '"') {
        out += "\\\"";
        continue;
      }
      char octal[5];
      snprintf(octal, sizeof(octal), "\\%03o", c);
      out += octal;
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string quoted(StringRef s) { return "\"" + escaped(s) + "\""; }

FailureOr<StringRef> dtypeOf(Type type) {
  if (type.isF32())
    return StringRef("tprt::DType::F32");
  if (type.isF16())
    return StringRef("tprt::DType::F16");
  if (type.isBF16())
    return StringRef("tprt::DType::BF16");
  return failure();
}

/// The graph inputs the entry function takes after the context, in order.
constexpr StringLiteral kInputs[] = {"input_ids", "attention_mask"};

/// Which entry input argument `index` of `func` is, if any.
std::optional<unsigned> inputIndex(func::FuncOp func, unsigned index) {
  auto name = func.getArgAttrOfType<StringAttr>(
      index, onnx_ir::ONNXDialect::kNameAttrName);
  if (!name)
    return std::nullopt;
  for (auto [i, input] : llvm::enumerate(kInputs))
    if (name.getValue() == input)
      return i;
  return std::nullopt;
}

/// On a call whose signature has a consuming form, that form
/// (#tp.consuming_form), until `releaseDeadTensors` knows whether the call
/// is the consumed operand's last reader.
constexpr StringLiteral kConsumingFormAttr = "tp.consuming_form";

/// An `emitc.call_opaque` of `call` with the converted `operands` of its op;
/// its results, one `tprt::Tensor` per result of the op (several are taken
/// from the `tprt::Tensors` the function returns).
SmallVector<Value> emitCall(OpBuilder &b, const RuntimeCall &call,
                            ValueRange operands, Value context,
                            Type tensorType) {
  Operation *op = call.getOp();
  MLIRContext *ctx = b.getContext();
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    emitc::VerbatimOp::create(b, op->getLoc(),
                              "// " + escaped(name.getName().getValue()));
  SmallVector<Value> callOperands = {context};
  SmallVector<Attribute> args = {b.getIndexAttr(0)};
  // Operands pass as themselves while they come in order; everything else
  // needs the explicit argument list.
  bool plain = true;
  const RuntimeSignature *consuming = call.getSignature()->consuming;
  std::optional<unsigned> consumedOperand;
  ArrayRef<RuntimeArg> params = call.getSignature()->params;
  bool slotted = takesActivationSlot(*call.getSignature());
  for (auto [position, arg, kind] :
       llvm::enumerate(call.getArgs(), slotted ? params.drop_back() : params)) {
    Attribute attr;
    if (auto *v = std::get_if<Value>(&arg)) {
      if (*v) {
        if (consuming &&
            consuming->params[position] == RuntimeArg::ConsumedTensor)
          consumedOperand = callOperands.size();
        unsigned index =
            llvm::find(op->getOperands(), *v) - op->getOperands().begin();
        attr = b.getIndexAttr(callOperands.size());
        callOperands.push_back(operands[index]);
      } else {
        attr = emitc::OpaqueAttr::get(ctx, "tprt::Tensor()");
      }
    } else if (auto *i = std::get_if<int64_t>(&arg)) {
      attr = kind == RuntimeArg::I32 ? b.getI32IntegerAttr(*i)
                                     : b.getI64IntegerAttr(*i);
    } else if (auto *f = std::get_if<double>(&arg)) {
      // EmitC would print NaN and infinities as <cmath> macros.
      attr = std::isfinite(*f)
                 ? Attribute(b.getF64FloatAttr(*f))
                 : emitc::OpaqueAttr::get(ctx, cppDoubleLiteral(*f));
    } else if (auto *flag = std::get_if<bool>(&arg)) {
      attr = b.getBoolAttr(*flag);
    } else if (auto *s = std::get_if<std::string>(&arg)) {
      attr = emitc::OpaqueAttr::get(
          ctx, kind == RuntimeArg::CString ? quoted(*s) : *s);
    } else if (auto *strings = std::get_if<SmallVector<std::string>>(&arg)) {
      std::string list = "{";
      for (auto [k, str] : llvm::enumerate(*strings))
        list += (k ? ", " : "") + quoted(str);
      attr = emitc::OpaqueAttr::get(ctx, list + "}");
    } else if (auto *reals = std::get_if<SmallVector<double>>(&arg)) {
      // Round-trip precision: the runtime gets the attribute's doubles.
      std::string list = "{";
      for (auto [k, d] : llvm::enumerate(*reals))
        list += (k ? ", " : "") + cppDoubleLiteral(d);
      attr = emitc::OpaqueAttr::get(ctx, list + "}");
    } else {
      std::string shape = "{";
      for (auto [k, d] : llvm::enumerate(std::get<SmallVector<int64_t>>(arg)))
        shape += (k ? ", " : "") + std::to_string(d);
      attr = emitc::OpaqueAttr::get(ctx, shape + "}");
    }
    plain &= isa<IntegerAttr>(attr) &&
             isa<IndexType>(cast<TypedAttr>(attr).getType());
    args.push_back(attr);
  }
  // The buffer tp-plan-activations gave the result, or none.
  if (slotted) {
    auto slot =
        op->getAttrOfType<IntegerAttr>(TPDialect::kActivationSlotAttrName);
    args.push_back(b.getI64IntegerAttr(slot ? slot.getInt() : -1));
    plain = false;
  }
  unsigned results = call.getSignature()->results;
  bool list = results == kVariadicResults || results > 1;
  if (results == kVariadicResults)
    results = op->getNumResults();
  SmallVector<Type> types;
  if (list)
    types.push_back(emitc::OpaqueType::get(ctx, "tprt::Tensors"));
  else if (results == 1)
    types.push_back(tensorType);
  auto callOp = emitc::CallOpaqueOp::create(
      b, op->getLoc(), types, call.getSignature()->callee, callOperands,
      plain ? ArrayAttr() : b.getArrayAttr(args));
  if (consumedOperand)
    callOp->setAttr(
        kConsumingFormAttr,
        ConsumingFormAttr::get(ctx, consuming->callee, *consumedOperand));
  // The layer loops find a layer from the parameters its calls read.
  if (isa<ParamBucketGatherOp>(op))
    inheritDecoderLayer(op, callOp);
  if (!list)
    return SmallVector<Value>(callOp.getResults());
  SmallVector<Value> taken;
  for (unsigned i = 0; i < results; ++i)
    taken.push_back(
        emitc::CallOpaqueOp::create(
            b, op->getLoc(), TypeRange{tensorType}, "tprt::take",
            callOp.getResult(0),
            b.getArrayAttr({b.getIndexAttr(0), b.getI64IntegerAttr(i)}))
            .getResult(0));
  return taken;
}

/// Whether some op of `module` computes in bf16 or f16 (tp-compute-type):
/// decided once for the module, since a training module's init holds the
/// parameters its steps compute with.
bool computesInReducedPrecision(ModuleOp module) {
  return module
      ->walk([](Operation *op) {
        for (Type type : op->getResultTypes())
          if (auto tensor = dyn_cast<RankedTensorType>(type))
            if (tensor.getElementType().isBF16() ||
                tensor.getElementType().isF16())
              return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// The global shape of parameter `index` of `func` (statically shaped): a
/// split argument's dimension times its blocks.
SmallVector<int64_t> globalShapeOf(func::FuncOp func, unsigned index) {
  auto type = cast<RankedTensorType>(func.getArgument(index).getType());
  SmallVector<int64_t> global(type.getShape());
  if (auto placement = func.getArgAttrOfType<PlacementAttr>(
          index, TPDialect::kPlacementAttrName))
    if (placement.getSplitDim() >= 0)
      global[placement.getSplitDim()] =
          placement.getGlobalSize(global[placement.getSplitDim()]);
  return global;
}

/// The runtime call of parameter `index` of `func`; failure if it is not a
/// located parameter. `reducedPrecision`: computesInReducedPrecision of
/// its module.
FailureOr<RuntimeCall> loadParamCall(func::FuncOp func, unsigned index,
                                     bool reducedPrecision) {
  auto fqn = func.getArgAttrOfType<StringAttr>(index, TPDialect::kFqnAttrName);
  auto source =
      func.getArgAttrOfType<SourceAttr>(index, TPDialect::kSourceAttrName);
  auto type = dyn_cast<RankedTensorType>(func.getArgument(index).getType());
  if (!fqn || !source || !type || !type.hasStaticShape())
    return func.emitError() << "argument " << index
                            << " is neither an input (input_ids, "
                               "attention_mask) nor a located parameter";
  // Stored in one type, held in the argument's (tp-compute-type). A bf16
  // or f16 parameter of a program that computes in f32 (IR that did not go
  // through tp-compute-type) is held widened: exact, and what its kernels
  // would compute in anyway.
  Type stored =
      source.getStoredType() ? source.getStoredType() : type.getElementType();
  Type heldType = type.getElementType();
  if (!reducedPrecision && (heldType.isBF16() || heldType.isF16()))
    heldType = Float32Type::get(func.getContext());
  FailureOr<StringRef> dtype = dtypeOf(stored);
  FailureOr<StringRef> held = dtypeOf(heldType);
  if (failed(dtype) || failed(held))
    return func.emitError()
           << "parameter '" << fqn.getValue() << "': no runtime type for "
           << type << " stored as " << stored;
  auto placement = func.getArgAttrOfType<PlacementAttr>(
      index, TPDialect::kPlacementAttrName);
  int64_t shardDim = placement ? placement.getSplitDim() : -1;
  int64_t shards = placement ? placement.getBlocks() : 1;
  int64_t replicas = placement ? placement.getReplicas() : 1;
  RuntimeCall call(func);
  call.callee(getLoadParamSignature())
      .str(fqn.getValue())
      .str(source.getInitializer())
      .str(source.getFile())
      .i64(source.getOffset())
      .i64(source.getLength())
      .str(*dtype)
      // load_param takes the global shape.
      .shape(globalShapeOf(func, index))
      .flag(source.getTransposed())
      // This rank's block when tp-partition split it: block rank / replicas.
      .i64(shardDim)
      .i64(shards)
      .i64(replicas)
      // An uneven split: each rank's range.
      .shape(placement ? placement.getStarts() : ArrayRef<int64_t>())
      .shape(placement ? placement.getSizes() : ArrayRef<int64_t>())
      .str(*held)
      // A folded Gemma norm weight stores w + 1.
      .f64(source.getStoredOffsetValue())
      // A folded Mamba2 A stores -exp(A_log).
      .flag(source.getStoredForm() == StoredForm::NegExp);
  return call;
}

/// Every tensor is a `tprt::Tensor` (a shared handle: passing one copies no
/// data).
struct RuntimeTypeConverter : public TypeConverter {
  explicit RuntimeTypeConverter(MLIRContext *ctx) {
    Type tensor = emitc::OpaqueType::get(ctx, "tprt::Tensor");
    addConversion([](Type type) -> std::optional<Type> {
      if (isa<TensorType>(type))
        return std::nullopt;
      return type;
    });
    addConversion([tensor](TensorType) { return tensor; });
  }
};

/// Any op that names its runtime call.
struct RuntimeCallLowering
    : public OpInterfaceConversionPattern<RuntimeCallOpInterface> {
  using OpInterfaceConversionPattern::OpInterfaceConversionPattern;

  LogicalResult
  matchAndRewrite(RuntimeCallOpInterface op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    RuntimeCall call(op);
    if (failed(op.buildRuntimeCall(call)) || failed(call.verify()))
      return failure();
    auto entry = op->getParentOfType<emitc::FuncOp>();
    if (!entry)
      return rewriter.notifyMatchFailure(op, "not in the entry function yet");
    Type tensor = emitc::OpaqueType::get(getContext(), "tprt::Tensor");
    rewriter.replaceOp(
        op, emitCall(rewriter, call, operands, entry.getArgument(0), tensor));
    return success();
  }
};

/// The C++ function of each entry point, by its role.
StringRef entryFunctionName(func::FuncOp func) {
  auto role = func->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName);
  if (role && role.getValue() == kTrainStepEntry)
    return "tprt_model_train_step";
  if (role && role.getValue() == kOptimizerStepEntry)
    return "tprt_model_optimizer_step";
  if (role && role.getValue() == kInitEntry)
    return "tprt_model_init";
  return "tprt_model_forward";
}

/// The activation plan of `func` (tp-plan-activations) as a table of
/// tprt::PlannedBuffer before `entry`, and the tprt::ActivationArena that
/// holds the call's activations at the start of `entry`'s body.
void emitActivationArena(OpBuilder &b, func::FuncOp func, emitc::FuncOp entry,
                         DenseI64ArrayAttr buffers) {
  std::string table = (entry.getSymName() + "_buffers").str();
  std::string init = "static const tprt::PlannedBuffer " + table + "[] = {";
  ArrayRef<int64_t> pairs = buffers.asArrayRef();
  for (size_t k = 0; k < pairs.size(); k += 2)
    init +=
        llvm::formatv("{0}{{{1}, {2}}", k ? ", " : "", pairs[k], pairs[k + 1]);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entry);
  emitc::VerbatimOp::create(b, func.getLoc(), init + "};");
  b.setInsertionPointToEnd(&entry.getBody().front());
  MLIRContext *ctx = b.getContext();
  auto bytes =
      func->getAttrOfType<IntegerAttr>(TPDialect::kActivationBytesAttrName);
  // input_ids is the argument after the context.
  emitc::CallOpaqueOp::create(
      b, func.getLoc(),
      TypeRange{emitc::OpaqueType::get(ctx, "tprt::ActivationArena")},
      "tprt::ActivationArena",
      ValueRange{entry.getArgument(0), entry.getArgument(1)},
      b.getArrayAttr({b.getIndexAttr(0), emitc::OpaqueAttr::get(ctx, table),
                      b.getI64IntegerAttr(pairs.size() / 2),
                      b.getI64IntegerAttr(bytes ? bytes.getInt() : 0),
                      b.getIndexAttr(1)}));
}

/// func.func @forward -> emitc.func @tprt_model_forward (and the training
/// step -> tprt_model_train_step; the optimizer step and the init, which
/// take only the context, -> tprt_model_optimizer_step, tprt_model_init);
/// parameters become load_param calls at its start, inputs its arguments.
/// Whether `user` reads its parameter operand from the data-parallel runs
/// (runs_bucket): the runtime call does not take the parameter.
static bool readsRunsOnly(Operation *user) {
  return llvm::TypeSwitch<Operation *, bool>(user)
      .Case<EmbeddingOp, AccumulateLinearCrossEntropyOp,
            AccumulateEmbeddingGradOp>(
          [](auto op) { return op.getRunsBucket().has_value(); })
      .Default([](Operation *) { return false; });
}

struct EntryLowering : public OpConversionPattern<func::FuncOp> {
  /// The decoder layer of each parameter by FQN, read before the
  /// conversion changes its users.
  using ParamLayers = llvm::StringMap<int64_t>;

  EntryLowering(const TypeConverter &converter, MLIRContext *ctx,
                bool reducedPrecision, const ParamLayers &paramLayers)
      : OpConversionPattern(converter, ctx), reducedPrecision(reducedPrecision),
        paramLayers(paramLayers) {}
  bool reducedPrecision;
  const ParamLayers &paramLayers;

  LogicalResult
  matchAndRewrite(func::FuncOp func, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = getContext();
    Type tensor = emitc::OpaqueType::get(ctx, "tprt::Tensor");
    StringRef name = entryFunctionName(func);
    SmallVector<Type, 3> inputs = {
        emitc::OpaqueType::get(ctx, "tprt::Context&")};
    if (name != "tprt_model_optimizer_step" && name != "tprt_model_init")
      inputs.append({tensor, tensor});
    SmallVector<Type, 1> results;
    if (func.getNumResults())
      results.push_back(tensor);
    auto type = rewriter.getFunctionType(inputs, results);
    auto entry = emitc::FuncOp::create(rewriter, func.getLoc(), name, type);
    Block *body = rewriter.createBlock(
        &entry.getBody(), {}, type.getInputs(),
        SmallVector<Location>(inputs.size(), func.getLoc()));
    SmallVector<Value> replacements;
    SmallVector<Operation *> unread;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (std::optional<unsigned> in = inputIndex(func, i)) {
        replacements.push_back(body->getArgument(1 + *in));
        continue;
      }
      // A parameter nothing here reads is not loaded: a ZeRO stage 3
      // training step reads its sharded ones through gathers, or, for a
      // streamed table, from its runs (the calls do not take it).
      if (llvm::all_of(func.getArgument(i).getUsers(), readsRunsOnly)) {
        unread.push_back(emitc::LiteralOp::create(rewriter, func.getLoc(),
                                                  tensor, "tprt::Tensor()"));
        replacements.push_back(unread.back()->getResult(0));
        continue;
      }
      FailureOr<RuntimeCall> call = loadParamCall(func, i, reducedPrecision);
      if (failed(call))
        return failure();
      Value param =
          emitCall(rewriter, *call, {}, body->getArgument(0), tensor)[0];
      // The layer loops group calls by the layer of the parameters they
      // read.
      if (auto fqn =
              func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName))
        if (auto layer = paramLayers.find(fqn.getValue());
            layer != paramLayers.end())
          setDecoderLayer(param.getDefiningOp(), layer->second);
      replacements.push_back(param);
    }
    if (auto buffers = func->getAttrOfType<DenseI64ArrayAttr>(
            TPDialect::kActivationBuffersAttrName))
      emitActivationArena(rewriter, func, entry, buffers);
    rewriter.inlineBlockBefore(&func.getBody().front(), body, body->end(),
                               replacements);
    // A streamed table's placeholder goes with the calls that ignore it.
    for (Operation *placeholder : unread)
      if (placeholder->use_empty())
        rewriter.eraseOp(placeholder);
    rewriter.eraseOp(func);
    return success();
  }
};

struct ReturnLowering : public OpConversionPattern<func::ReturnOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(func::ReturnOp ret, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<emitc::ReturnOp>(
        ret, ret.getNumOperands() ? adaptor.getOperands()[0] : Value());
    return success();
  }
};

/// What the conversion cannot lower, diagnosed before it starts.
LogicalResult checkLowerable(func::FuncOp func, bool reducedPrecision) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (!inputIndex(func, i) &&
        failed(loadParamCall(func, i, reducedPrecision)))
      return failure();
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      bool init = entryFunctionName(func) == "tprt_model_init";
      if (ret.getNumOperands() != (init ? 0u : 1u))
        return ret.emitError(init ? "the init function returns nothing"
                                  : "an entry point must return exactly one "
                                    "tensor (the logits, the training "
                                    "step's loss or the optimizer step's "
                                    "norm)");
      continue;
    }
    auto callable = dyn_cast<RuntimeCallOpInterface>(op);
    if (!callable)
      return op.emitError("no tprt lowering for ") << op.getName();
    RuntimeCall call(&op);
    if (failed(callable.buildRuntimeCall(call)) || failed(call.verify()))
      return failure();
    if (op.hasAttr(TPDialect::kActivationSlotAttrName) &&
        !takesActivationSlot(*call.getSignature()))
      return op.emitError()
             << "'" << TPDialect::kActivationSlotAttrName
             << "' on an op whose runtime function ("
             << call.getSignature()->callee << ") does not place its result";
  }
  // The arena is sized from the input ids.
  if (func->hasAttr(TPDialect::kActivationBuffersAttrName) &&
      (entryFunctionName(func) == "tprt_model_optimizer_step" ||
       entryFunctionName(func) == "tprt_model_init"))
    return func.emitError() << "an activation plan needs the input ids, "
                               "which this entry point does not take";
  return success();
}

struct TPToEmitCPass : public tp::impl::TPToEmitCBase<TPToEmitCPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> entry = requireEntry<func::FuncOp>(
        module, kForwardEntry,
        "expected one func.func @forward (the entry tp.entry = "
        "\"forward\"), found 0");
    if (failed(entry))
      return signalPassFailure();
    func::FuncOp func = *entry;
    bool reduced = computesInReducedPrecision(module);
    FailureOr<FunctionOpInterface> trainStep =
        lookupEntry(module, kTrainStepEntry);
    if (failed(trainStep) || failed(checkLowerable(func, reduced)))
      return signalPassFailure();
    auto train = dyn_cast_or_null<func::FuncOp>(trainStep->getOperation());
    if (train && failed(checkLowerable(train, reduced)))
      return signalPassFailure();
    // A training program updates its parameters in @optimizer_step.
    func::FuncOp update;
    if (train) {
      FailureOr<func::FuncOp> found = requireEntry<func::FuncOp>(
          module, kOptimizerStepEntry,
          "a training program needs func.func @optimizer_step (run "
          "tp-build-train-step)");
      if (failed(found) || failed(checkLowerable(*found, reduced)))
        return signalPassFailure();
      update = *found;
    }
    FailureOr<FunctionOpInterface> init = lookupEntry(module, kInitEntry);
    if (failed(init))
      return signalPassFailure();
    if (*init) {
      auto initFunc = dyn_cast<func::FuncOp>(init->getOperation());
      if (!initFunc || failed(checkLowerable(initFunc, reduced)))
        return signalPassFailure();
    }
    // Read before the conversion erases what it describes.
    std::string summary = programSummary(module, func, train, update);

    std::string path = modelPath;
    if (path.empty())
      if (auto file = module->getAttrOfType<StringAttr>("onnx.file"))
        path = file.getValue().str();
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    emitc::IncludeOp::create(builder, func.getLoc(), "tprt/tprt.h",
                             /*is_standard_include=*/false);
    // Non-finite constants are spelled through std::numeric_limits.
    emitc::IncludeOp::create(builder, func.getLoc(), "limits",
                             /*is_standard_include=*/true);
    emitc::VerbatimOp::create(
        builder, func.getLoc(),
        "const char *const tprt_model_path = " + quoted(path) + ";");
    // The ranks the program was partitioned for; main checks them once.
    int64_t tpSize = gridSize(module, "tp");
    emitc::VerbatimOp::create(
        builder, func.getLoc(),
        "const int tprt_model_tp_size = " + std::to_string(tpSize) + ";");
    int64_t dpSize = gridSize(module, "dp");
    emitc::VerbatimOp::create(
        builder, func.getLoc(),
        "const int tprt_model_dp_size = " + std::to_string(dpSize) + ";");
    // Sequence parallelism splits dim 1 of 3-D activations: the input's
    // sequence must divide by the ranks (main pads it to a multiple).
    bool splitsSequence = false;
    func.walk([&](Operation *op) {
      int64_t axis = -1;
      if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op))
        axis = scatter.getScatterAxis().getSExtValue();
      else if (auto slice = dyn_cast<shard::AllSliceOp>(op))
        axis = slice.getSliceAxis().getSExtValue();
      if (axis == 1 &&
          cast<ShapedType>(op->getOperand(0).getType()).getRank() == 3)
        splitsSequence = true;
    });
    emitc::VerbatimOp::create(builder, func.getLoc(),
                              "const int tprt_model_sequence_multiple = " +
                                  std::to_string(splitsSequence ? tpSize : 1) +
                                  ";");
    emitc::VerbatimOp::create(builder, func.getLoc(),
                              weightFileTable(func, path));
    emitc::VerbatimOp::create(builder, func.getLoc(), paramTable(func));
    // A training program names its vocabulary (main's --train checks token
    // files against it before the first step).
    if (train) {
      FailureOr<ModelConfig> config = ModelConfig::read(module);
      int64_t vocab =
          succeeded(config) && config->vocabSize ? *config->vocabSize : 0;
      emitc::VerbatimOp::create(builder, func.getLoc(),
                                "const int64_t tprt_model_vocab_size = " +
                                    std::to_string(vocab) + ";");
    }
    // ... and its optimizer (--resume refuses a checkpoint of another).
    if (update)
      update.walk([&](OptimizerUpdateOp op) {
        emitc::VerbatimOp::create(builder, func.getLoc(),
                                  "const char *const tprt_model_optimizer = " +
                                      quoted(op.getOptimizer()) + ";");
        return WalkResult::interrupt();
      });

    MLIRContext *ctx = &getContext();
    RuntimeTypeConverter converter(ctx);
    ConversionTarget target(*ctx);
    target.addLegalDialect<emitc::EmitCDialect>();
    target.addLegalOp<ModuleOp, shard::GridOp>();
    RewritePatternSet patterns(ctx);
    patterns.add<RuntimeCallLowering>(converter, ctx);
    // A parameter's layer is where its readers are (in the forward and
    // the training step); the init and the optimizer step, which only
    // broadcast or update it, take it by FQN.
    EntryLowering::ParamLayers paramLayers;
    module.walk([&](func::FuncOp func) {
      for (BlockArgument arg : func.getArguments())
        if (auto fqn = func.getArgAttrOfType<StringAttr>(
                arg.getArgNumber(), TPDialect::kFqnAttrName))
          if (std::optional<int64_t> layer = decoderLayerOfUsers(arg))
            paramLayers.try_emplace(fqn.getValue(), *layer);
    });
    patterns.add<EntryLowering>(converter, ctx, reduced, paramLayers);
    patterns.add<ReturnLowering>(converter, ctx);
    if (failed(applyFullConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    // The grid was for the collectives; the runtime knows its communicator.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
    unsigned loops = 0;
    for (auto entry : module.getOps<emitc::FuncOp>()) {
      if (layerLoops)
        loops += rollLayerLoops(entry, loops);
      releaseDeadTensors(entry);
    }
    // The program's fingerprint: ranks launched with different programs
    // stop before their first collective.
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os, OpPrintingFlags().elideLargeElementsAttrs());
    builder.setInsertionPointToEnd(module.getBody());
    emitc::VerbatimOp::create(
        builder, module.getLoc(),
        llvm::formatv("const uint64_t tprt_model_fingerprint = {0:x}ull;",
                      llvm::xxh3_64bits(text))
            .str());
    emitc::VerbatimOp::create(builder, module.getLoc(), summary);
  }

  /// What ranks must agree on, one line per fact (tp, each parameter's
  /// type and placement, each replica class, each bucket) as the C array
  /// tprt_model_summary: when the fingerprints differ, the ranks compare it
  /// line by line and name the first difference.
  static std::string programSummary(ModuleOp module, func::FuncOp forward,
                                    func::FuncOp train, func::FuncOp update) {
    SmallVector<std::string> lines;
    lines.push_back("tp " + std::to_string(gridSize(module, "tp")));
    lines.push_back("dp " + std::to_string(gridSize(module, "dp")));
    auto print = [](auto printable) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << printable;
      return s;
    };
    // Parameters and gradients in FQN order: a parameter one program has
    // and the other lacks is then the first difference, not a shift.
    size_t first = lines.size();
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      auto fqn =
          forward.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
      if (!fqn)
        continue;
      auto placement = forward.getArgAttrOfType<PlacementAttr>(
          i, TPDialect::kPlacementAttrName);
      lines.push_back("parameter " + fqn.getValue().str() + " " +
                      print(forward.getArgument(i).getType()) +
                      (placement ? " " + print(placement) : ""));
    }
    llvm::sort(lines.begin() + first, lines.end());
    first = lines.size();
    // Every accumulation, fused or not; a parameter accumulated once per
    // use (tp-fuse-grad-accumulation) is one line.
    auto gradientLine = [&](auto acc) {
      lines.push_back("gradient " + acc.getFqn().str() + " " +
                      (acc.getReduction()
                           ? stringifyGradReduction(*acc.getReduction())
                       : acc.getOwned() ? StringRef("excluded")
                                        : StringRef("sharded"))
                          .str());
    };
    if (train)
      train.walk([&](Operation *op) {
        llvm::TypeSwitch<Operation *, void>(op)
            .Case<AccumulateGradOp, AccumulateLinearGradWeightOp,
                  AccumulateEmbeddingGradOp, AccumulateLinearCrossEntropyOp>(
                gradientLine);
      });
    llvm::sort(lines.begin() + first, lines.end());
    lines.erase(std::unique(lines.begin() + first, lines.end()), lines.end());
    if (update)
      update.walk([&](GradBucketAllReduceOp bucket) {
        std::string line =
            llvm::formatv("bucket {0} over {4} {1} {2} {3} bytes:",
                          bucket.getBucketAttr().getInt(),
                          stringifyGradReduction(bucket.getReduction()),
                          print(bucket.getDtype()),
                          bucket.getBytesAttr().getInt(), bucket.getGroup());
        for (Attribute fqn : bucket.getFqns())
          line += " " + cast<StringAttr>(fqn).getValue().str();
        lines.push_back(line);
      });
    module.walk([&](GradBucketReduceScatterOp bucket) {
      std::string line = llvm::formatv(
          "sharded bucket {0} over dp{4} {1} {2} bytes padded to {3}:",
          bucket.getBucketAttr().getInt(), print(bucket.getDtype()),
          bucket.getBytesAttr().getInt(), bucket.getPaddedBytesAttr().getInt(),
          bucket.getMicroBatch() ? " per micro-batch" : "");
      for (Attribute fqn : bucket.getFqns())
        line += " " + cast<StringAttr>(fqn).getValue().str();
      lines.push_back(line);
    });
    std::string table = "const char *const tprt_model_summary[] = {";
    for (const std::string &line : lines)
      table += quoted(line) + ", ";
    return table + "nullptr};";
  }

  /// Every tensor a function computes is released right after its last
  /// reader (`tprt::release` resets the variable): a forward pass, and a
  /// training step's forward and backward, then hold only the live
  /// activations instead of all of them until the function returns. A last
  /// reader with a consuming form takes the tensor instead (an all-reduce
  /// then sums in its storage rather than in a copy).
  static void releaseDeadTensors(emitc::FuncOp func) {
    SmallVector<Block *> blocks;
    func.walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      releaseDeadTensors(*block);
    // What the emitter does not print: the consuming forms decided above
    // and the decoder layers the layer loops read.
    func.walk([](emitc::CallOpaqueOp call) {
      call->removeAttr(kConsumingFormAttr);
      call->removeAttr(TPDialect::kLayerAttrName);
    });
  }

  /// Whether `reader`, the last reader of `v`, takes it over: its consuming
  /// form, when it has one and `v` is the operand it consumes (and no
  /// other of its operands).
  static bool consumes(emitc::CallOpaqueOp reader, Value v) {
    auto form = reader->getAttrOfType<ConsumingFormAttr>(kConsumingFormAttr);
    if (!form || form.getOperand() >= reader.getNumOperands() ||
        reader.getOperand(form.getOperand()) != v ||
        llvm::count(reader.getOperands(), v) != 1)
      return false;
    reader.setCallee(form.getCallee());
    return true;
  }

  /// The tensors `body` defines, released after their last reader in it
  /// (a loop reading a tensor is its reader).
  static void releaseDeadTensors(Block &body) {
    OpBuilder builder(body.getParent()->getContext());
    for (Operation &op : llvm::make_early_inc_range(body)) {
      // Parameters stay in the context's cache anyway; a literal (an
      // empty tensor) holds nothing.
      auto call = dyn_cast<emitc::CallOpaqueOp>(op);
      if ((call && call.getCallee() == getLoadParamSignature().callee) ||
          isa<emitc::LiteralOp>(op))
        continue;
      for (Value v : op.getResults()) {
        auto type = dyn_cast<emitc::OpaqueType>(v.getType());
        if (!type || (type.getValue() != "tprt::Tensor" &&
                      type.getValue() != "tprt::Tensors"))
          continue;
        // The last reader in this straight-line block; a returned value is
        // the caller's.
        Operation *last = &op;
        for (Operation *user : v.getUsers())
          if (Operation *reader = body.findAncestorOpInBlock(*user);
              reader && last->isBeforeInBlock(reader))
            last = reader;
        if (last->hasTrait<OpTrait::IsTerminator>())
          continue;
        // A reader that takes the tensor leaves the variable empty.
        if (auto reader = dyn_cast<emitc::CallOpaqueOp>(last);
            reader && consumes(reader, v))
          continue;
        builder.setInsertionPointAfter(last);
        emitc::CallOpaqueOp::create(builder, op.getLoc(), TypeRange(),
                                    "tprt::release", ValueRange{v});
      }
    }
  }

  /// The weights files the parameters read, with the size and sampled hash
  /// they have now (files that cannot be read here, as in hand-written
  /// tests, are not listed).
  static std::string weightFileTable(func::FuncOp func, StringRef modelPath) {
    StringRef modelDir = llvm::sys::path::parent_path(modelPath);
    std::string table = "const tprt::WeightFile tprt_model_weight_files[] = {";
    llvm::StringSet<> seen;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto source =
          func.getArgAttrOfType<SourceAttr>(i, TPDialect::kSourceAttrName);
      if (!source || !seen.insert(source.getFile()).second)
        continue;
      SmallString<256> path(source.getFile());
      if (!llvm::sys::path::is_absolute(path)) {
        path = modelDir;
        llvm::sys::path::append(path, source.getFile());
      }
      uint64_t size = 0;
      if (llvm::sys::fs::file_size(path, size))
        continue;
      table +=
          llvm::formatv("{{{0}, {1}ull, {2:x}ull}, ", quoted(source.getFile()),
                        size, tprt::sampledFileHash(path.c_str(), size))
              .str();
    }
    return table + "{nullptr, 0, 0}};";
  }

  /// The parameters the program reads, by FQN with their global shapes
  /// (a split argument's dimension times its blocks), once each.
  static std::string paramTable(func::FuncOp func) {
    std::string table = "const tprt::ParamSpec tprt_model_params[] = {";
    llvm::StringSet<> seen;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto fqn = func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
      auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
      if (!fqn || !type || !type.hasStaticShape() || type.getRank() > 8 ||
          !seen.insert(fqn.getValue()).second)
        continue;
      SmallVector<int64_t> global = globalShapeOf(func, i);
      std::string dims;
      for (auto [k, d] : llvm::enumerate(global))
        dims += (k ? ", " : "") + std::to_string(d);
      table += "{" + quoted(fqn.getValue()) + ", " +
               std::to_string(global.size()) + ", {" + dims + "}}, ";
    }
    return table + "{nullptr, 0, {}}};";
  }
};

} // namespace
