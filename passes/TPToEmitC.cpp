//===- TPToEmitC.cpp - tp ops to calls into the tprt runtime --------------===//

#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPTOEMITC
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A C++ string literal.
std::string quoted(StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

FailureOr<StringRef> dtypeOf(Type type) {
  if (type.isF32())
    return StringRef("tprt::DType::F32");
  if (type.isF16())
    return StringRef("tprt::DType::F16");
  if (type.isBF16())
    return StringRef("tprt::DType::BF16");
  return failure();
}

class Lowering {
public:
  Lowering(func::FuncOp func, StringRef modelPath)
      : func(func), ctx(func.getContext()), builder(ctx), modelPath(modelPath) {
    tensorType = emitc::OpaqueType::get(ctx, "tprt::Tensor");
    inputType = emitc::OpaqueType::get(ctx, "const tprt::Tensor&");
    contextType = emitc::OpaqueType::get(ctx, "tprt::Context&");
  }

  LogicalResult run();

private:
  Attribute literal(StringRef text) {
    return emitc::OpaqueAttr::get(ctx, text);
  }
  Attribute operand(unsigned i) { return builder.getIndexAttr(i); }
  Value call(Operation *op, StringRef callee, ArrayRef<Value> operands,
             ArrayRef<Attribute> args = {}) {
    SmallVector<Value> all = {contextArg};
    all.append(operands.begin(), operands.end());
    ArrayAttr argsAttr;
    if (!args.empty()) {
      SmallVector<Attribute> list;
      for (unsigned i = 0; i < all.size(); ++i)
        list.push_back(operand(i));
      list.append(args.begin(), args.end());
      argsAttr = builder.getArrayAttr(list);
    }
    comment(op);
    return emitc::CallOpaqueOp::create(builder, op->getLoc(),
                                       TypeRange{tensorType}, callee, all,
                                       argsAttr)
        .getResult(0);
  }
  void comment(Operation *op) {
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      emitc::VerbatimOp::create(builder, op->getLoc(),
                                "// " + name.getName().str());
  }
  Attribute f64(double v) { return builder.getF64FloatAttr(v); }
  Attribute i64(int64_t v) { return builder.getI64IntegerAttr(v); }
  Attribute flag(bool v) { return builder.getBoolAttr(v); }

  LogicalResult lowerParam(unsigned index, Value &result);
  LogicalResult lowerOp(Operation *op);

  func::FuncOp func;
  MLIRContext *ctx;
  OpBuilder builder;
  std::string modelPath;
  Type tensorType, inputType, contextType;
  Value contextArg;
  IRMapping map;
};

LogicalResult Lowering::lowerParam(unsigned index, Value &result) {
  auto fqn = func.getArgAttrOfType<StringAttr>(index, TPDialect::kFqnAttrName);
  auto source =
      func.getArgAttrOfType<SourceAttr>(index, TPDialect::kSourceAttrName);
  auto type = dyn_cast<RankedTensorType>(func.getArgument(index).getType());
  if (!fqn || !source || !type || !type.hasStaticShape())
    return func.emitError() << "argument " << index
                            << " is neither an input (input_ids, "
                               "attention_mask) nor a located parameter";
  auto dimAttr = func.getArgAttrOfType<IntegerAttr>(index, "tp.shard_dim");
  auto shardsAttr = func.getArgAttrOfType<IntegerAttr>(index, "tp.shards");
  int64_t shardDim = dimAttr ? dimAttr.getInt() : -1;
  int64_t shards = shardsAttr ? shardsAttr.getInt() : 1;
  auto replicasAttr =
      func.getArgAttrOfType<IntegerAttr>(index, "tp.shard_replicas");
  int64_t replicas = replicasAttr ? replicasAttr.getInt() : 1;
  // load_param takes the global shape.
  SmallVector<int64_t> global(type.getShape());
  if (shardDim >= 0)
    global[shardDim] *= shards;
  FailureOr<StringRef> dtype = dtypeOf(type.getElementType());
  if (failed(dtype))
    return func.emitError() << "parameter '" << fqn.getValue()
                            << "': no runtime type for " << type;
  std::string shape = "{";
  for (auto [i, d] : llvm::enumerate(global))
    shape += (i ? ", " : "") + std::to_string(d);
  shape += "}";
  result =
      emitc::CallOpaqueOp::create(
          builder, func.getLoc(), TypeRange{tensorType}, "tprt::load_param",
          ValueRange{contextArg},
          builder.getArrayAttr(
              {operand(0), literal(quoted(fqn.getValue())),
               literal(quoted(source.getInitializer())),
               literal(quoted(source.getFile())),
               builder.getI64IntegerAttr(source.getOffset()),
               builder.getI64IntegerAttr(source.getLength()), literal(*dtype),
               literal(shape), flag(source.getTransposed()),
               // This rank's block when tp-partition split it: block
               // rank / replicas.
               builder.getI32IntegerAttr(shardDim), i64(shards),
               i64(shardDim >= 0 ? -replicas : 0)}))
          .getResult(0);
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  auto in = [&](Value v) { return map.lookup(v); };
  Value result;
  LogicalResult status =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](EmbeddingOp o) {
            result =
                call(op,
                     o.getVocabParallel() ? "tprt::embedding_vocab_parallel"
                                          : "tprt::embedding",
                     {in(o.getIds()), in(o.getTable())});
            return success();
          })
          .Case([&](shard::AllReduceOp o) -> LogicalResult {
            if (o.getReduction() != shard::ReductionKind::Sum)
              return o.emitError("only sum all-reduces have a runtime call");
            result = call(op, "tprt::all_reduce_sum", {in(o.getInput())});
            return success();
          })
          .Case([&](shard::AllGatherOp o) {
            result = call(op, "tprt::all_gather", {in(o.getInput())},
                          {i64(o.getGatherAxis().getSExtValue())});
            return success();
          })
          .Case([&](shard::ReduceScatterOp o) -> LogicalResult {
            if (o.getReduction() != shard::ReductionKind::Sum)
              return o.emitError("only sum reduce-scatters have a runtime "
                                 "call");
            result = call(op, "tprt::reduce_scatter_sum", {in(o.getInput())},
                          {i64(o.getScatterAxis().getSExtValue())});
            return success();
          })
          .Case([&](LinearOp o) {
            // The linear and mm forms are one flattened product.
            bool bmm = o.getForm() == LinearForm::Bmm;
            if (Value bias = o.getBias())
              result =
                  call(op, bmm ? "tprt::linear_bmm_bias" : "tprt::linear_bias",
                       {in(o.getX()), in(o.getWeight()), in(bias)});
            else
              result = call(op, bmm ? "tprt::linear_bmm" : "tprt::linear",
                            {in(o.getX()), in(o.getWeight())});
            return success();
          })
          .Case([&](BiasAddOp o) {
            result =
                call(op, "tprt::bias_add", {in(o.getX()), in(o.getBias())});
            return success();
          })
          .Case([&](RmsNormOp o) {
            auto group = o.getGroupSizeAttr();
            result =
                call(op, "tprt::rms_norm", {in(o.getX()), in(o.getWeight())},
                     {f64(o.getEpsilonAttr().getValueAsDouble()),
                      f64(o.getWeightOffsetAttr().getValueAsDouble()),
                      i64(group ? group.getInt() : 0)});
            return success();
          })
          .Case([&](RotaryOp o) {
            auto rot = o.getRotaryDimAttr();
            result = call(op, "tprt::rotary", {in(o.getX())},
                          {i64(o.getHeadDimAttr().getInt()),
                           i64(rot ? rot.getInt() : 0),
                           f64(o.getThetaAttr().getValueAsDouble()),
                           flag(o.getInterleaved())});
            return success();
          })
          .Case([&](AttentionOp o) {
            SmallVector<Value> operands = {in(o.getQ()), in(o.getK()),
                                           in(o.getV())};
            SmallVector<Attribute> extra;
            if (Value mask = o.getKeyMask())
              operands.push_back(in(mask));
            else
              extra.push_back(literal("tprt::Tensor()"));
            auto window = o.getSlidingWindowAttr();
            auto softcap = o.getSoftcapAttr();
            extra.append({i64(o.getNumHeadsAttr().getInt()),
                          i64(o.getNumKvHeadsAttr().getInt()),
                          i64(o.getHeadDimAttr().getInt()),
                          f64(o.getScaleAttr().getValueAsDouble()),
                          flag(o.getCausal()),
                          i64(window ? window.getInt() : 0),
                          f64(softcap ? softcap.getValueAsDouble() : 0.0)});
            result = call(op, "tprt::attention", operands, extra);
            return success();
          })
          .Case([&](Mamba2MixerOp o) {
            SmallVector<Value> operands = {in(o.getX()),
                                           in(o.getInProjWeight()),
                                           in(o.getConvWeight()),
                                           in(o.getConvBias()),
                                           in(o.getDtBias()),
                                           in(o.getALog()),
                                           in(o.getD()),
                                           in(o.getNormWeight()),
                                           in(o.getOutProjWeight())};
            SmallVector<Attribute> extra;
            if (Value mask = o.getKeyMask())
              operands.push_back(in(mask));
            else
              extra.push_back(literal("tprt::Tensor()"));
            extra.append({i64(o.getNumHeadsAttr().getInt()),
                          i64(o.getHeadDimAttr().getInt()),
                          i64(o.getNGroupsAttr().getInt()),
                          i64(o.getStateSizeAttr().getInt()),
                          i64(o.getConvKernelAttr().getInt()),
                          f64(o.getNormEpsAttr().getValueAsDouble()),
                          f64(o.getDtMinAttr().getValueAsDouble()),
                          flag(o.getFoldedA())});
            result = call(op, "tprt::mamba2_mixer", operands, extra);
            return success();
          })
          .Case([&](SiluOp o) {
            result = call(op, "tprt::silu", {in(o.getX())});
            return success();
          })
          .Case([&](GeluOp o) {
            result =
                call(op, "tprt::gelu", {in(o.getX())},
                     {flag(o.getApproximate() == GeluApproximation::Tanh)});
            return success();
          })
          .Case([&](ReluSquaredOp o) {
            result = call(op, "tprt::relu_squared", {in(o.getX())});
            return success();
          })
          .Case([&](AddOp o) {
            result = call(op, "tprt::add", {in(o.getLhs()), in(o.getRhs())});
            return success();
          })
          .Case([&](MulOp o) {
            result = call(op, "tprt::mul", {in(o.getLhs()), in(o.getRhs())});
            return success();
          })
          .Case([&](ScaleOp o) {
            result = call(op, "tprt::scale", {in(o.getX())},
                          {f64(o.getFactorAttr().getValueAsDouble())});
            return success();
          })
          .Case([&](func::ReturnOp o) -> LogicalResult {
            if (o.getNumOperands() != 1)
              return o.emitError("the program must return exactly the logits");
            emitc::ReturnOp::create(builder, o.getLoc(), in(o.getOperand(0)));
            return success();
          })
          .Default([&](Operation *other) -> LogicalResult {
            return other->emitError("no tprt lowering for ")
                   << other->getName();
          });
  if (failed(status))
    return failure();
  if (result)
    map.map(op->getResult(0), result);
  return success();
}

LogicalResult Lowering::run() {
  ModuleOp module = func->getParentOfType<ModuleOp>();
  if (modelPath.empty())
    if (auto file = module->getAttrOfType<StringAttr>("onnx.file"))
      modelPath = file.getValue().str();

  builder.setInsertionPointToStart(module.getBody());
  emitc::IncludeOp::create(builder, func.getLoc(), "tprt/tprt.h",
                           /*is_standard_include=*/false);
  emitc::VerbatimOp::create(
      builder, func.getLoc(),
      "const char *const tprt_model_path = " + quoted(modelPath) + ";");

  builder.setInsertionPoint(func);
  auto type = builder.getFunctionType({contextType, inputType, inputType},
                                      {tensorType});
  auto entry =
      emitc::FuncOp::create(builder, func.getLoc(), "tprt_model_forward", type);
  Block *body = entry.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  contextArg = body->getArgument(0);

  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    Value arg = func.getArgument(i);
    auto name = func.getArgAttrOfType<StringAttr>(
        i, onnx_ir::ONNXDialect::kNameAttrName);
    if (name && name.getValue() == "input_ids") {
      map.map(arg, body->getArgument(1));
      continue;
    }
    if (name && name.getValue() == "attention_mask") {
      map.map(arg, body->getArgument(2));
      continue;
    }
    Value param;
    if (failed(lowerParam(i, param)))
      return failure();
    map.map(arg, param);
  }
  for (Operation &op : func.getBody().front())
    if (failed(lowerOp(&op)))
      return failure();
  func.erase();
  // The grid was for the collectives; the runtime knows its communicator.
  for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
    grid.erase();
  return success();
}

struct TPToEmitCPass : public tp::impl::TPToEmitCBase<TPToEmitCPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.getSymName() == "forward")
        funcs.push_back(func);
    if (funcs.size() != 1) {
      getOperation().emitError("expected one func.func @forward, found ")
          << funcs.size();
      return signalPassFailure();
    }
    if (failed(Lowering(funcs.front(), modelPath).run()))
      return signalPassFailure();
  }
};

} // namespace
