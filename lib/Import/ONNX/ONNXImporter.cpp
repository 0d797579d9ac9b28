//===- ONNXImporter.cpp - ONNX model to onnx-level IR ---------------------===//
//
// Turns a ModelProto into a `func.func @main_graph` of `onnx.node` ops.
// Initializers become arguments that locate their bytes (#tp.source), in the
// model file or in ONNX external data; only small ones are read.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Import/ONNX/ONNXImporter.h"

#include "ModelFile.h"
#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPUtils.h"

#include "google/protobuf/unknown_field_set.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InterleavedRange.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <cstring>
#include <deque>

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::detail;

namespace {

/// MLIR element type of an ONNX TensorProto.DataType, or null.
Type getElementType(MLIRContext *ctx, int dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT16:
    return b.getI16Type();
  case onnx::TensorProto::INT8:
    return b.getI8Type();
  case onnx::TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case onnx::TensorProto::UINT16:
    return b.getIntegerType(16, false);
  case onnx::TensorProto::UINT32:
    return b.getIntegerType(32, false);
  case onnx::TensorProto::UINT64:
    return b.getIntegerType(64, false);
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return {};
  }
}

/// NodeProto.metadata_props (ONNX >= 1.16) is field 9, which the Debian
/// schema (ONNX 1.12) predates: protobuf keeps it as an unknown field.
constexpr int kNodeMetadataProps = 9;

/// The module scope of a node as an FQN prefix, or "".
std::string scopeOfNode(const onnx::NodeProto &node) {
  // Dynamo exporter: metadata "pkg.torch.onnx.name_scopes" is a Python list
  // literal of the module path, ending with the node's own name.
  const google::protobuf::UnknownFieldSet &unknown = node.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    if (field.number() != kNodeMetadataProps ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto prop;
    if (!prop.ParseFromString(field.length_delimited()) ||
        prop.key() != "pkg.torch.onnx.name_scopes")
      continue;
    SmallVector<StringRef> entries;
    StringRef(prop.value()).trim("[] ").split(entries, ',');
    if (entries.size() < 2)
      return "";
    return entries[entries.size() - 2].trim().trim("'\"").str();
  }
  // TorchScript exporter: "/model/layers.0/self_attn/q_proj/MatMul".
  StringRef name = node.name();
  if (!name.starts_with("/"))
    return "";
  SmallVector<StringRef> parts;
  name.drop_front().split(parts, '/');
  if (parts.size() < 2)
    return "";
  parts.pop_back();
  // onnxruntime-genai's model builder calls a layer's attention "attn";
  // HuggingFace calls it "self_attn".
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i] == "attn" && parts[i - 1].starts_with("layers."))
      parts[i] = "self_attn";
  return llvm::join(parts, ".");
}

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef bytes, StringRef path,
           const ImportOptions &options)
      : ctx(ctx), builder(ctx), bytes(bytes), path(path), options(options),
        fileLoc(FileLineColLoc::get(ctx, path, 0, 0)) {
    modelDir = llvm::sys::path::parent_path(path).str();
    if (modelDir.empty())
      modelDir = ".";
  }

  OwningOpRef<ModuleOp> run();

private:
  InFlightDiagnostic error() { return emitError(fileLoc); }
  Location nodeLoc(const onnx::NodeProto &node) {
    return NameLoc::get(builder.getStringAttr(node.name()), fileLoc);
  }

  FailureOr<RankedTensorType> tensorTypeOf(const onnx::TensorProto &tensor,
                                           StringRef what);
  LogicalResult addInitializer(const InlineInitializer &init,
                               SmallVectorImpl<Type> &types,
                               SmallVectorImpl<DictionaryAttr> &attrs);
  FailureOr<DictionaryAttr> bindToCheckpoint(StringRef name,
                                             RankedTensorType type);
  FailureOr<DenseElementsAttr> readTypedData(const onnx::TensorProto &tensor,
                                             RankedTensorType type,
                                             StringRef what);
  FailureOr<SourceAttr> resolveExternal(const onnx::TensorProto &tensor,
                                        uint64_t expectedBytes);
  FailureOr<Type> valueType(const onnx::TypeProto &type, StringRef name);
  std::optional<std::string> readSourceBytes(SourceAttr source, uint64_t offset,
                                             uint64_t length);
  void findTransposedCopies(ArrayRef<Type> types,
                            MutableArrayRef<DictionaryAttr> attrs);
  FailureOr<Attribute> convertAttribute(const onnx::AttributeProto &attr,
                                        const onnx::NodeProto &node);
  Type inferResultType(const onnx::NodeProto &node, unsigned index,
                       ArrayRef<Value> inputs, DictionaryAttr attributes);
  FailureOr<std::vector<const onnx::NodeProto *>>
  sortNodes(const onnx::GraphProto &graph,
            const llvm::StringMap<bool> &available);

  /// The function's arguments: graph inputs that are not initializers,
  /// then initializers, with their names.
  struct Arguments {
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<std::string> names;
  };
  LogicalResult collectArguments(Arguments &args);
  /// Whether the file is a graph-only export, checked against whether a
  /// checkpoint was given.
  FailureOr<bool> checkGraphOnly();
  /// The module with the file's opsets, producer and name.
  OwningOpRef<ModuleOp> createModule();
  /// One node, its inputs and outputs by name in `values`.
  LogicalResult importNode(const onnx::NodeProto &node,
                           llvm::StringMap<Value> &values, Value &none);
  LogicalResult addReturn(func::FuncOp func,
                          const llvm::StringMap<Value> &values);

  MLIRContext *ctx;
  OpBuilder builder;
  StringRef bytes;
  std::string path, modelDir;
  const ImportOptions &options;
  Location fileLoc;
  ModelFile file;
  /// Declared types of graph values (value_info, inputs, outputs).
  llvm::StringMap<const onnx::TypeProto *> declaredTypes;
};

/// Transformer tensors have rank 5 at most; a rank far beyond that is a
/// damaged or hostile file (printing and parsing a type of rank 200,000 is
/// quadratic), refused with the tensor's name.
static constexpr int kMaxRank = 64;

FailureOr<RankedTensorType>
Importer::tensorTypeOf(const onnx::TensorProto &tensor, StringRef what) {
  Type elem = getElementType(ctx, tensor.data_type());
  if (!elem)
    return error() << what << " '" << tensor.name()
                   << "': unsupported data type " << tensor.data_type();
  if (tensor.dims_size() > kMaxRank)
    return error() << what << " '" << tensor.name() << "': rank "
                   << tensor.dims_size() << " exceeds " << kMaxRank;
  SmallVector<int64_t> shape;
  uint64_t elements = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0)
      return error() << what << " '" << tensor.name()
                     << "': negative dimension " << dim;
    bool overflow = false;
    elements = llvm::SaturatingMultiply(elements, static_cast<uint64_t>(dim),
                                        &overflow);
    if (overflow || elements > (uint64_t(1) << 62))
      return error() << what << " '" << tensor.name()
                     << "': the element count overflows";
    shape.push_back(dim);
  }
  return RankedTensorType::get(shape, elem);
}

FailureOr<DenseElementsAttr>
Importer::readTypedData(const onnx::TensorProto &tensor, RankedTensorType type,
                        StringRef what) {
  int64_t n = type.getNumElements();
  Type elem = type.getElementType();
  auto mismatch = [&](int64_t got) {
    return error() << what << " '" << tensor.name() << "' has " << got
                   << " values but its shape " << type << " needs " << n;
  };
  if (elem.isF32()) {
    if (tensor.float_data_size() != n)
      return mismatch(tensor.float_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<float>(tensor.float_data().data(), n));
  }
  if (elem.isF64()) {
    if (tensor.double_data_size() != n)
      return mismatch(tensor.double_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<double>(tensor.double_data().data(), n));
  }
  if (elem.isInteger(64)) {
    if (tensor.int64_data_size() != n)
      return mismatch(tensor.int64_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<int64_t>(tensor.int64_data().data(), n));
  }
  if (elem.isInteger(1)) {
    if (tensor.int32_data_size() != n)
      return mismatch(tensor.int32_data_size());
    SmallVector<bool> values(tensor.int32_data().begin(),
                             tensor.int32_data().end());
    return DenseElementsAttr::get(type, ArrayRef<bool>(values));
  }
  if (elem.isInteger(32)) {
    if (tensor.int32_data_size() != n)
      return mismatch(tensor.int32_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<int32_t>(tensor.int32_data().data(), n));
  }
  return error() << what << " '" << tensor.name() << "': typed storage of "
                 << elem << " is not supported; store it as raw_data";
}

/// Decoded payload of a tensor whose bytes are the raw little-endian layout.
static DenseElementsAttr fromRawBytes(RankedTensorType type,
                                      StringRef payload) {
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> values;
    for (char c : payload)
      values.push_back(c != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(values));
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(payload.data(), payload.size()));
}

FailureOr<SourceAttr> Importer::resolveExternal(const onnx::TensorProto &tensor,
                                                uint64_t expectedBytes) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : tensor.external_data()) {
    const std::string &key = entry.key();
    if (key == "location") {
      location = entry.value();
      continue;
    }
    if (key == "offset" || key == "length") {
      uint64_t value;
      if (StringRef(entry.value()).getAsInteger(10, value))
        return error() << "tensor '" << tensor.name() << "': external data "
                       << key << " '" << entry.value()
                       << "' is not a non-negative integer";
      if (key == "offset")
        offset = value;
      else
        length = value;
    }
  }
  if (location.empty())
    return error() << "tensor '" << tensor.name()
                   << "': external data has no location";
  if (llvm::sys::path::is_absolute(location))
    return error() << "tensor '" << tensor.name()
                   << "': external data location '" << location
                   << "' is an absolute path; it must be relative to the "
                      "model's directory";
  for (StringRef component : llvm::make_range(llvm::sys::path::begin(location),
                                              llvm::sys::path::end(location)))
    if (component == "..")
      return error() << "tensor '" << tensor.name()
                     << "': external data location '" << location
                     << "' has a '..' component";

  SmallString<256> full(modelDir);
  llvm::sys::path::append(full, location);
  if (!llvm::sys::fs::exists(full))
    return error() << "tensor '" << tensor.name() << "': external data file '"
                   << full << "' does not exist";
  SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(modelDir, realDir) ||
      llvm::sys::fs::real_path(full, realFile))
    return error() << "tensor '" << tensor.name() << "': cannot resolve '"
                   << full << "'";
  StringRef fileRef = realFile;
  if (!fileRef.starts_with(realDir) || fileRef.size() <= realDir.size() ||
      !llvm::sys::path::is_separator(fileRef[realDir.size()]))
    return error() << "tensor '" << tensor.name()
                   << "': external data location '" << location
                   << "' resolves to '" << realFile
                   << "', outside the model's directory";
  if (!llvm::sys::fs::is_regular_file(realFile))
    return error() << "tensor '" << tensor.name() << "': '" << full
                   << "' is not a regular file";
  uint64_t fileSize;
  if (llvm::sys::fs::file_size(realFile, fileSize))
    return error() << "tensor '" << tensor.name() << "': cannot stat '" << full
                   << "'";
  if (offset > fileSize)
    return error() << "tensor '" << tensor.name() << "': external data offset "
                   << offset << " is past the end of '" << location << "' ("
                   << fileSize << " bytes)";
  uint64_t size = length ? *length : fileSize - offset;
  if (size > fileSize - offset)
    return error() << "tensor '" << tensor.name() << "': external data ["
                   << offset << ", " << offset << " + " << size
                   << ") runs past the end of '" << location << "' ("
                   << fileSize << " bytes): the file is truncated";
  if (size != expectedBytes)
    return error() << "tensor '" << tensor.name() << "': external data holds "
                   << size << " bytes but its shape and type need "
                   << expectedBytes;
  return SourceAttr::get(ctx, tensor.name(), location, offset, size,
                         /*transposed=*/false, /*stored_type=*/Type(),
                         /*stored_offset=*/FloatAttr(), StoredForm::Parameter);
}

LogicalResult Importer::addInitializer(const InlineInitializer &init,
                                       SmallVectorImpl<Type> &types,
                                       SmallVectorImpl<DictionaryAttr> &attrs) {
  const onnx::TensorProto &tensor = init.tensor;
  FailureOr<RankedTensorType> type = tensorTypeOf(tensor, "initializer");
  if (failed(type))
    return failure();
  std::optional<uint64_t> expected = getTensorByteSize(*type);
  if (!expected)
    return error() << "initializer '" << tensor.name() << "': cannot size "
                   << *type;

  SmallVector<NamedAttribute> argAttrs;
  argAttrs.push_back(
      builder.getNamedAttr(onnx_ir::ONNXDialect::kNameAttrName,
                           builder.getStringAttr(tensor.name())));
  DenseElementsAttr value;
  bool small = *expected <= options.inlineValueLimit;

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<SourceAttr> source = resolveExternal(tensor, *expected);
    if (failed(source))
      return failure();
    argAttrs.push_back(
        builder.getNamedAttr(TPDialect::kSourceAttrName, *source));
    if (small) {
      SmallString<256> full(modelDir);
      llvm::sys::path::append(full, source->getFile());
      auto buffer = llvm::MemoryBuffer::getFileSlice(full, source->getLength(),
                                                     source->getOffset());
      if (!buffer)
        return error() << "tensor '" << tensor.name() << "': cannot read '"
                       << full << "'";
      value = fromRawBytes(*type, (*buffer)->getBuffer());
    }
  } else if (init.hasPayload) {
    if (init.length != *expected)
      return error() << "initializer '" << tensor.name() << "' holds "
                     << init.length << " bytes (at byte offset " << init.offset
                     << ") but " << *type << " needs " << *expected;
    if (init.packedFloats && !type->getElementType().isF32())
      return error() << "initializer '" << tensor.name()
                     << "': float_data for a non-f32 tensor";
    argAttrs.push_back(builder.getNamedAttr(
        TPDialect::kSourceAttrName,
        SourceAttr::get(ctx, tensor.name(), llvm::sys::path::filename(path),
                        init.offset, init.length, /*transposed=*/false,
                        /*stored_type=*/Type(),
                        /*stored_offset=*/FloatAttr(), StoredForm::Parameter)));
    if (small)
      value = fromRawBytes(*type, bytes.substr(init.offset, init.length));
  } else {
    // Typed fields that are not raw bytes (int64_data, ...): only small
    // constants are stored this way; read them.
    FailureOr<DenseElementsAttr> typed =
        readTypedData(tensor, *type, "initializer");
    if (failed(typed))
      return failure();
    value = *typed;
  }
  if (value)
    argAttrs.push_back(
        builder.getNamedAttr(onnx_ir::ONNXDialect::kValueAttrName, value));
  types.push_back(*type);
  attrs.push_back(builder.getDictionaryAttr(argAttrs));
  return success();
}

/// A graph-only export's parameter `name` (a graph input of static shape)
/// as a parameter argument located in the checkpoint's shard; the
/// checkpoint may hold it in another float type (`stored_type`).
FailureOr<DictionaryAttr> Importer::bindToCheckpoint(StringRef name,
                                                     RankedTensorType type) {
  auto entry = options.checkpoint->find(name);
  if (entry == options.checkpoint->end())
    return error() << "graph input '" << name << "' of type " << type
                   << " is a parameter of this graph-only export, but "
                      "checkpoint '"
                   << options.checkpointPath << "' has no tensor of that name";
  const SafetensorsTensor &tensor = entry->second;
  if (ArrayRef<int64_t>(tensor.shape) != type.getShape())
    return error() << "checkpoint '" << options.checkpointPath << "': tensor '"
                   << name << "' has shape [" << llvm::interleaved(tensor.shape)
                   << "], the graph's input is of type " << type;
  Type stored = llvm::StringSwitch<Type>(tensor.dtype)
                    .Case("F32", builder.getF32Type())
                    .Case("BF16", builder.getBF16Type())
                    .Case("F16", builder.getF16Type())
                    .Default(Type());
  if (!stored || !isa<FloatType>(type.getElementType()))
    return error() << "checkpoint '" << options.checkpointPath << "': tensor '"
                   << name << "' is " << tensor.dtype
                   << "; parameters are read from F32, BF16 or F16";
  SmallString<256> file(tensor.file);
  if (llvm::sys::fs::make_absolute(file))
    return error() << "cannot resolve '" << tensor.file << "'";
  bool converted = stored != type.getElementType();
  SmallVector<NamedAttribute> attrs;
  attrs.push_back(builder.getNamedAttr(onnx_ir::ONNXDialect::kNameAttrName,
                                       builder.getStringAttr(name)));
  attrs.push_back(builder.getNamedAttr(
      TPDialect::kSourceAttrName,
      SourceAttr::get(ctx, name, file, tensor.offset, tensor.length,
                      /*transposed=*/false, converted ? stored : Type(),
                      /*stored_offset=*/FloatAttr(), StoredForm::Parameter)));
  // As an initializer of this size would be: its value too.
  if (!converted && tensor.length <= options.inlineValueLimit) {
    auto buffer =
        llvm::MemoryBuffer::getFileSlice(file, tensor.length, tensor.offset);
    if (!buffer)
      return error() << "tensor '" << name << "': cannot read '" << file << "'";
    attrs.push_back(
        builder.getNamedAttr(onnx_ir::ONNXDialect::kValueAttrName,
                             fromRawBytes(type, (*buffer)->getBuffer())));
  }
  return builder.getDictionaryAttr(attrs);
}

FailureOr<Type> Importer::valueType(const onnx::TypeProto &type,
                                    StringRef name) {
  if (!type.has_tensor_type())
    return error() << "value '" << name << "' is not a tensor";
  const auto &tensorType = type.tensor_type();
  Type elem = getElementType(ctx, tensorType.elem_type());
  if (!elem)
    return error() << "value '" << name << "': unsupported element type "
                   << tensorType.elem_type();
  if (!tensorType.has_shape())
    return Type(UnrankedTensorType::get(elem));
  if (tensorType.shape().dim_size() > kMaxRank)
    return error() << "value '" << name << "': rank "
                   << tensorType.shape().dim_size() << " exceeds " << kMaxRank;
  SmallVector<int64_t> shape;
  for (const auto &dim : tensorType.shape().dim()) {
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0)
        return error() << "value '" << name << "': negative dimension "
                       << dim.dim_value();
      shape.push_back(dim.dim_value());
    } else {
      shape.push_back(ShapedType::kDynamic);
    }
  }
  return Type(RankedTensorType::get(shape, elem));
}

FailureOr<Attribute>
Importer::convertAttribute(const onnx::AttributeProto &attr,
                           const onnx::NodeProto &node) {
  auto nodeError = [&]() {
    return emitError(nodeLoc(node))
           << "node '" << node.name() << "' (" << node.op_type()
           << "): attribute '" << attr.name() << "': ";
  };
  if (!attr.ref_attr_name().empty())
    return nodeError() << "references a function attribute, which is not "
                          "supported";
  switch (attr.type()) {
  case onnx::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case onnx::AttributeProto::INT:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case onnx::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(attr.s()));
  case onnx::AttributeProto::FLOATS: {
    SmallVector<float> values(attr.floats().begin(), attr.floats().end());
    return Attribute(builder.getDenseF32ArrayAttr(values));
  }
  case onnx::AttributeProto::INTS: {
    SmallVector<int64_t> values(attr.ints().begin(), attr.ints().end());
    return Attribute(builder.getDenseI64ArrayAttr(values));
  }
  case onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> values;
    for (const std::string &s : attr.strings())
      values.push_back(builder.getStringAttr(s));
    return Attribute(builder.getArrayAttr(values));
  }
  case onnx::AttributeProto::TENSOR: {
    const onnx::TensorProto &tensor = attr.t();
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      return nodeError() << "external data in a node attribute is not "
                            "supported";
    // Errors name the node: a constant's tensor often has no name.
    std::string what = "node '" + node.name() + "' (" + node.op_type() +
                       "): attribute '" + attr.name() + "': constant";
    FailureOr<RankedTensorType> type = tensorTypeOf(tensor, what);
    if (failed(type))
      return failure();
    if (tensor.has_raw_data()) {
      std::optional<uint64_t> expected = getTensorByteSize(*type);
      if (!expected || *expected != tensor.raw_data().size())
        return nodeError() << "tensor holds " << tensor.raw_data().size()
                           << " bytes but " << *type << " needs "
                           << (expected ? *expected : 0);
      return Attribute(fromRawBytes(*type, tensor.raw_data()));
    }
    FailureOr<DenseElementsAttr> typed = readTypedData(tensor, *type, what);
    if (failed(typed))
      return failure();
    return Attribute(*typed);
  }
  default:
    // The kind by number and name: the enum must not print as a character.
    return nodeError() << "attribute '" << attr.name() << "' of kind "
                       << static_cast<int>(attr.type()) << " ("
                       << onnx::AttributeProto::AttributeType_Name(attr.type())
                       << ") is not supported (graphs, sparse tensors and "
                          "types are not)";
  }
}

Type Importer::inferResultType(const onnx::NodeProto &node, unsigned index,
                               ArrayRef<Value> inputs,
                               DictionaryAttr attributes) {
  StringRef op = node.op_type();
  auto unranked = [](Type elem) -> Type {
    return UnrankedTensorType::get(elem);
  };
  auto inputElem = [&](unsigned i) -> Type {
    if (i < inputs.size())
      if (auto shaped = dyn_cast<ShapedType>(inputs[i].getType()))
        return shaped.getElementType();
    return {};
  };
  if (op == "Shape" || op == "Size" || op == "NonZero" || op == "ArgMax" ||
      op == "ArgMin")
    return unranked(builder.getI64Type());
  if (op == "Equal" || op == "Less" || op == "LessOrEqual" || op == "Greater" ||
      op == "GreaterOrEqual" || op == "Not" || op == "And" || op == "Or" ||
      op == "Xor" || op == "IsNaN" || op == "IsInf" ||
      (op == "Dropout" && index == 1))
    return unranked(builder.getI1Type());
  if (op == "Cast" || op == "EyeLike")
    if (auto to = attributes.getAs<IntegerAttr>(op == "Cast" ? "to" : "dtype"))
      if (Type elem = getElementType(ctx, to.getInt()))
        return unranked(elem);
  if (op == "CastLike")
    if (Type elem = inputElem(1))
      return unranked(elem);
  if (op == "Constant" || op == "ConstantOfShape") {
    if (auto value = attributes.getAs<DenseElementsAttr>("value"))
      return op == "Constant" ? Type(value.getType())
                              : unranked(value.getElementType());
    if (attributes.get("value_int") || attributes.get("value_ints"))
      return unranked(builder.getI64Type());
    return unranked(builder.getF32Type());
  }
  if (op == "Where")
    if (Type elem = inputElem(1))
      return unranked(elem);
  for (unsigned i = 0; i < inputs.size(); ++i)
    if (Type elem = inputElem(i))
      return unranked(elem);
  return unranked(builder.getF32Type());
}

FailureOr<std::vector<const onnx::NodeProto *>>
Importer::sortNodes(const onnx::GraphProto &graph,
                    const llvm::StringMap<bool> &available) {
  // Kahn's algorithm over value names; ONNX requires a sorted graph but
  // exporters do not always write one.
  llvm::StringMap<unsigned> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string &out : graph.node(i).output()) {
      if (out.empty())
        continue;
      if (available.count(out) || !producer.try_emplace(out, i).second) {
        emitError(nodeLoc(graph.node(i)))
            << "node '" << graph.node(i).name() << "' ("
            << graph.node(i).op_type() << "): value '" << out
            << "' is defined twice";
        return failure();
      }
    }
  std::vector<unsigned> pending(graph.node_size(), 0);
  std::vector<SmallVector<unsigned>> users(graph.node_size());
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    for (const std::string &in : node.input()) {
      if (in.empty() || available.count(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end()) {
        emitError(nodeLoc(node))
            << "node '" << node.name() << "' (" << node.op_type()
            << "): input '" << in
            << "' is not a graph input, an initializer or a node output "
               "(missing initializer?)";
        return failure();
      }
      ++pending[i];
      users[it->second].push_back(i);
    }
  }
  std::vector<const onnx::NodeProto *> order;
  std::deque<unsigned> ready;
  for (int i = 0; i < graph.node_size(); ++i)
    if (pending[i] == 0)
      ready.push_back(i);
  while (!ready.empty()) {
    unsigned i = ready.front();
    ready.pop_front();
    order.push_back(&graph.node(i));
    for (unsigned user : users[i])
      if (--pending[user] == 0)
        ready.push_back(user);
  }
  if (order.size() != static_cast<size_t>(graph.node_size())) {
    for (int i = 0; i < graph.node_size(); ++i)
      if (pending[i] != 0) {
        emitError(nodeLoc(graph.node(i)))
            << "the graph has a cycle through node '" << graph.node(i).name()
            << "' (" << graph.node(i).op_type() << ")";
        break;
      }
    return failure();
  }
  return order;
}

std::optional<std::string>
Importer::readSourceBytes(SourceAttr source, uint64_t offset, uint64_t length) {
  if (source.getFile() == llvm::sys::path::filename(path))
    return bytes.substr(source.getOffset() + offset, length).str();
  SmallString<256> full(modelDir);
  llvm::sys::path::append(full, source.getFile());
  auto buffer = llvm::MemoryBuffer::getFileSlice(full, length,
                                                 source.getOffset() + offset);
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().str();
}

void Importer::findTransposedCopies(ArrayRef<Type> types,
                                    MutableArrayRef<DictionaryAttr> attrs) {
  // Candidates: 2-D, located weights. A copy is anonymous (not FQN-like);
  // an original has a name. Cheap checks (a few elements) reject almost
  // every pair before a full comparison.
  auto looksNamed = [](StringRef n) {
    return !n.contains(':') && n.contains('.');
  };
  struct Candidate {
    unsigned index;
    RankedTensorType type;
    SourceAttr source;
    StringRef name;
  };
  SmallVector<Candidate> named, anonymous;
  for (unsigned i = 0; i < types.size(); ++i) {
    auto type = dyn_cast<RankedTensorType>(types[i]);
    auto source = attrs[i].getAs<SourceAttr>(TPDialect::kSourceAttrName);
    auto name = attrs[i].getAs<StringAttr>(onnx_ir::ONNXDialect::kNameAttrName);
    // Empty matrices have nothing to compare (and no position to sample).
    // A square one is a candidate too: a model whose vocabulary is as large
    // as its hidden size ties a square embedding.
    if (!type || type.getRank() != 2 || !source || !name ||
        type.getNumElements() == 0)
      continue;
    (looksNamed(name.getValue()) ? named : anonymous)
        .push_back({i, type, source, name.getValue()});
  }
  for (const Candidate &copy : anonymous) {
    for (const Candidate &orig : named) {
      if (orig.type.getElementType() != copy.type.getElementType() ||
          orig.type.getDimSize(0) != copy.type.getDimSize(1) ||
          orig.type.getDimSize(1) != copy.type.getDimSize(0))
        continue;
      uint64_t elem = *getElementByteSize(orig.type.getElementType());
      int64_t rows = orig.type.getDimSize(0), cols = orig.type.getDimSize(1);
      // orig[r][c] == copy[c][r] at a few spread positions first.
      bool same = true;
      for (int k = 0; k < 16 && same; ++k) {
        int64_t r = (k * 7919) % rows, c = (k * 104729) % cols;
        auto a = readSourceBytes(orig.source, (r * cols + c) * elem, elem);
        auto b = readSourceBytes(copy.source, (c * rows + r) * elem, elem);
        same = a && b && *a == *b;
      }
      if (!same)
        continue;
      auto a = readSourceBytes(orig.source, 0, orig.source.getLength());
      auto b = readSourceBytes(copy.source, 0, copy.source.getLength());
      if (!a || !b)
        continue;
      for (int64_t r = 0; r < rows && same; ++r)
        for (int64_t c = 0; c < cols && same; ++c)
          same = std::memcmp(a->data() + (r * cols + c) * elem,
                             b->data() + (c * rows + r) * elem, elem) == 0;
      if (!same)
        continue;
      NamedAttrList list(attrs[copy.index]);
      list.set(onnx_ir::ONNXDialect::kTransposedCopyOfAttrName,
               builder.getStringAttr(orig.name));
      attrs[copy.index] = list.getDictionary(ctx);
      break;
    }
  }
}

FailureOr<bool> Importer::checkGraphOnly() {
  bool graphOnly = llvm::any_of(file.model.metadata_props(), [](auto &prop) {
    return prop.key() == kGraphOnlyExportKey;
  });
  if (graphOnly && !options.checkpoint)
    return error() << "'" << path
                   << "' is a graph-only export (tools/tp-export): its "
                      "parameters are graph inputs; give the checkpoint they "
                      "come from (tpc --weights HF_DIR)";
  if (!graphOnly && options.checkpoint)
    return error() << "'" << path
                   << "' holds its parameters; a checkpoint binds those of a "
                      "graph-only export (tools/tp-export). Run the program "
                      "with --weights to read another checkpoint";
  return graphOnly;
}

LogicalResult Importer::collectArguments(Arguments &args) {
  const onnx::GraphProto &graph = file.model.graph();
  llvm::StringMap<bool> isInitializer;
  for (const InlineInitializer &init : file.initializers) {
    if (init.tensor.name().empty())
      return error() << "an initializer has no name";
    if (!isInitializer.try_emplace(init.tensor.name(), true).second)
      return error() << "initializer '" << init.tensor.name()
                     << "' is defined twice";
  }
  FailureOr<bool> graphOnly = checkGraphOnly();
  if (failed(graphOnly))
    return failure();
  for (const auto &input : graph.input()) {
    if (isInitializer.count(input.name()))
      continue;
    FailureOr<Type> type = valueType(input.type(), input.name());
    if (failed(type))
      return failure();
    args.types.push_back(*type);
    args.names.push_back(input.name());
    // A graph-only export's parameters: the inputs of static shape (the
    // model's own inputs have a dynamic batch and sequence).
    auto ranked = dyn_cast<RankedTensorType>(*type);
    if (*graphOnly && ranked && ranked.hasStaticShape()) {
      FailureOr<DictionaryAttr> attrs = bindToCheckpoint(input.name(), ranked);
      if (failed(attrs))
        return failure();
      args.attrs.push_back(*attrs);
      continue;
    }
    args.attrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(onnx_ir::ONNXDialect::kNameAttrName,
                             builder.getStringAttr(input.name()))));
  }
  for (const InlineInitializer &init : file.initializers) {
    if (failed(addInitializer(init, args.types, args.attrs)))
      return failure();
    args.names.push_back(init.tensor.name());
  }
  findTransposedCopies(args.types, args.attrs);
  return success();
}

OwningOpRef<ModuleOp> Importer::createModule() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  SmallVector<NamedAttribute> opsets;
  for (const auto &opset : file.model.opset_import())
    opsets.push_back(builder.getNamedAttr(
        opset.domain().empty() ? "ai.onnx" : opset.domain(),
        builder.getI64IntegerAttr(opset.version())));
  (*module)->setAttr("onnx.opset_import", builder.getDictionaryAttr(opsets));
  (*module)->setAttr("onnx.producer",
                     builder.getStringAttr(file.model.producer_name() + " " +
                                           file.model.producer_version()));
  (*module)->setAttr("onnx.file",
                     builder.getStringAttr(llvm::sys::path::filename(path)));
  return module;
}

LogicalResult Importer::importNode(const onnx::NodeProto &node,
                                   llvm::StringMap<Value> &values,
                                   Value &none) {
  SmallVector<Value> inputs;
  for (const std::string &in : node.input()) {
    if (in.empty()) {
      if (!none)
        none = onnx_ir::NoneOp::create(builder, fileLoc, builder.getNoneType());
      inputs.push_back(none);
      continue;
    }
    inputs.push_back(values.lookup(in));
  }
  SmallVector<NamedAttribute> attrs;
  for (const auto &attr : node.attribute()) {
    FailureOr<Attribute> converted = convertAttribute(attr, node);
    if (failed(converted))
      return failure();
    attrs.push_back(builder.getNamedAttr(attr.name(), *converted));
  }
  DictionaryAttr attributes = builder.getDictionaryAttr(attrs);
  SmallVector<Type> types;
  for (int i = 0; i < node.output_size(); ++i) {
    auto declared = declaredTypes.find(node.output(i));
    Type type;
    if (declared != declaredTypes.end()) {
      FailureOr<Type> t = valueType(*declared->second, node.output(i));
      if (failed(t))
        return failure();
      type = *t;
    } else {
      type = inferResultType(node, i, inputs, attributes);
    }
    types.push_back(type);
  }
  std::string scope = scopeOfNode(node);
  auto op = onnx_ir::NodeOp::create(
      builder, nodeLoc(node), types, node.op_type(), inputs, node.domain(),
      node.name(), attributes,
      scope.empty() ? StringAttr() : builder.getStringAttr(scope));
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      values[node.output(i)] = op.getResult(i);
  return success();
}

LogicalResult Importer::addReturn(func::FuncOp func,
                                  const llvm::StringMap<Value> &values) {
  SmallVector<Value> results;
  SmallVector<Attribute> outputNames;
  for (const auto &output : file.model.graph().output()) {
    Value value = values.lookup(output.name());
    if (!value)
      return error() << "graph output '" << output.name()
                     << "' is never computed";
    results.push_back(value);
    outputNames.push_back(builder.getStringAttr(output.name()));
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func->setAttr("onnx.output_names", builder.getArrayAttr(outputNames));
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  llvm::Expected<ModelFile> read = readModelFile(bytes);
  if (!read) {
    error() << llvm::toString(read.takeError());
    return {};
  }
  file = std::move(*read);
  const onnx::GraphProto &graph = file.model.graph();
  for (const auto &info : graph.value_info())
    declaredTypes[info.name()] = &info.type();
  for (const auto &info : graph.output())
    declaredTypes[info.name()] = &info.type();

  Arguments args;
  if (failed(collectArguments(args)))
    return {};
  llvm::StringMap<bool> available;
  for (const std::string &name : args.names)
    available[name] = true;
  SmallVector<Type> resultTypes;
  for (const auto &output : graph.output()) {
    FailureOr<Type> type = valueType(output.type(), output.name());
    if (failed(type))
      return {};
    resultTypes.push_back(*type);
  }
  FailureOr<std::vector<const onnx::NodeProto *>> order =
      sortNodes(graph, available);
  if (failed(order))
    return {};

  OwningOpRef<ModuleOp> module = createModule();
  builder.setInsertionPointToEnd(module->getBody());
  auto func =
      func::FuncOp::create(builder, fileLoc, "main_graph",
                           builder.getFunctionType(args.types, resultTypes));
  func.setAllArgAttrs(args.attrs);
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  llvm::StringMap<Value> values;
  for (auto [name, arg] : llvm::zip(args.names, body->getArguments()))
    values[name] = arg;
  Value none;
  for (const onnx::NodeProto *node : *order)
    if (failed(importNode(*node, values, none)))
      return {};
  if (failed(addReturn(func, values)))
    return {};
  return module;
}

} // namespace

OwningOpRef<ModuleOp>
mlir::tp::importONNXModel(const llvm::MemoryBuffer &buffer, StringRef path,
                          MLIRContext *ctx, const ImportOptions &options) {
  ctx->loadDialect<TPDialect, onnx_ir::ONNXDialect, func::FuncDialect>();
  return Importer(ctx, buffer.getBuffer(), path, options).run();
}

OwningOpRef<ModuleOp> mlir::tp::importONNXFile(StringRef path, MLIRContext *ctx,
                                               const ImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    emitError(FileLineColLoc::get(ctx, path, 0, 0))
        << "cannot open '" << path << "': " << buffer.getError().message();
    return {};
  }
  return importONNXModel(**buffer, path, ctx, options);
}

void mlir::tp::registerImportONNXTranslation() {
  static TranslateToMLIRRegistration importOnnx(
      "import-onnx", "import an ONNX model (.onnx) as onnx-level IR",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *ctx) -> OwningOpRef<Operation *> {
        const llvm::MemoryBuffer *buffer =
            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
        return importONNXModel(*buffer, buffer->getBufferIdentifier(), ctx);
      },
      [](DialectRegistry &registry) {
        // What the importer produces; nothing of the pipeline.
        registry.insert<onnx_ir::ONNXDialect, TPDialect, func::FuncDialect>();
      });
}
