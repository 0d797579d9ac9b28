//===- ModelFile.cpp - ONNX protobuf without its weight bytes -------------===//

#include "ModelFile.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

#include <climits>

using namespace mlir::tp::detail;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

namespace {

// Field numbers of onnx.proto.
constexpr int kModelGraph = 7;
constexpr int kGraphInitializer = 5;
constexpr int kGraphSparseInitializer = 15;
constexpr int kTensorFloatData = 4;
constexpr int kTensorRawData = 9;

/// One field of a message: its number, wire type, the byte range of the
/// whole field (tag included) and, for length-delimited fields, of its value.
struct Field {
  int number;
  WireFormatLite::WireType wireType;
  uint64_t begin, end;
  uint64_t valueBegin, valueEnd;
};

/// Walks the top-level fields of the message in bytes [begin, end) of
/// `data`. Calls `onField` for each; stops at the first malformed field.
template <typename Fn>
bool walkFields(llvm::StringRef data, uint64_t begin, uint64_t end,
                std::string &error, Fn onField) {
  CodedInputStream in(reinterpret_cast<const uint8_t *>(data.data() + begin),
                      static_cast<int>(end - begin));
  in.SetTotalBytesLimit(INT_MAX);
  while (true) {
    uint64_t fieldBegin = begin + in.CurrentPosition();
    if (fieldBegin == end)
      return true;
    uint32_t tag = in.ReadTag();
    if (tag == 0) {
      error = "malformed protobuf: bad field tag at byte offset " +
              std::to_string(fieldBegin);
      return false;
    }
    Field field{WireFormatLite::GetTagFieldNumber(tag),
                WireFormatLite::GetTagWireType(tag),
                fieldBegin,
                0,
                0,
                0};
    if (field.wireType == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length;
      if (!in.ReadVarint32(&length)) {
        error = "malformed protobuf: bad length at byte offset " +
                std::to_string(fieldBegin);
        return false;
      }
      field.valueBegin = begin + in.CurrentPosition();
      field.valueEnd = field.valueBegin + length;
      if (field.valueEnd > end || !in.Skip(static_cast<int>(length))) {
        error = "malformed protobuf: field " + std::to_string(field.number) +
                " at byte offset " + std::to_string(fieldBegin) +
                " runs past the end of its message (" + std::to_string(length) +
                " bytes)";
        return false;
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      error = "malformed protobuf: truncated field " +
              std::to_string(field.number) + " at byte offset " +
              std::to_string(fieldBegin);
      return false;
    }
    field.end = begin + in.CurrentPosition();
    if (!onField(field))
      return false;
  }
}

bool parseInto(google::protobuf::MessageLite &message, const std::string &bytes,
               const char *what, std::string &error) {
  if (message.ParseFromString(bytes))
    return true;
  error = std::string("malformed protobuf: cannot parse the ") + what;
  return false;
}

bool readInitializer(llvm::StringRef data, const Field &field,
                     InlineInitializer &init, std::string &error) {
  std::string rest;
  bool ok = walkFields(
      data, field.valueBegin, field.valueEnd, error, [&](const Field &f) {
        bool payload =
            f.wireType == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
            (f.number == kTensorRawData || f.number == kTensorFloatData);
        if (!payload) {
          rest.append(data.data() + f.begin, f.end - f.begin);
          return true;
        }
        init.offset = f.valueBegin;
        init.length = f.valueEnd - f.valueBegin;
        init.hasPayload = true;
        init.packedFloats = f.number == kTensorFloatData;
        return true;
      });
  if (!ok)
    return false;
  if (!parseInto(init.tensor, rest, "initializer", error)) {
    error += " at byte offset " + std::to_string(field.begin);
    return false;
  }
  return true;
}

} // namespace

/// readModelFile with the error as a message.
static bool readModelFileInto(llvm::StringRef bytes, ModelFile &result,
                              std::string &error) {
  if (bytes.size() >= static_cast<size_t>(INT_MAX)) {
    error = "the model file is larger than 2 GiB; protobuf cannot hold it, "
            "store the weights as external data";
    return false;
  }
  std::string modelRest, graphRest;
  // The graph's other fields, each with its byte range in the file, to say
  // where a graph protobuf cannot parse.
  std::vector<Field> graphFields;
  bool sawGraph = false;
  bool ok = walkFields(bytes, 0, bytes.size(), error, [&](const Field &f) {
    if (f.number != kModelGraph ||
        f.wireType != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      modelRest.append(bytes.data() + f.begin, f.end - f.begin);
      return true;
    }
    sawGraph = true;
    return walkFields(
        bytes, f.valueBegin, f.valueEnd, error, [&](const Field &g) {
          if (g.number == kGraphSparseInitializer) {
            error = "sparse initializers are not supported "
                    "(byte offset " +
                    std::to_string(g.begin) + ")";
            return false;
          }
          if (g.number != kGraphInitializer ||
              g.wireType != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
            graphRest.append(bytes.data() + g.begin, g.end - g.begin);
            graphFields.push_back(g);
            return true;
          }
          result.initializers.emplace_back();
          return readInitializer(bytes, g, result.initializers.back(), error);
        });
  });
  if (!ok)
    return false;
  if (!sawGraph) {
    error = "the file has no ModelProto graph (is it an ONNX model?)";
    return false;
  }
  if (!parseInto(result.model, modelRest, "model", error))
    return false;
  if (parseInto(*result.model.mutable_graph(), graphRest, "graph", error))
    return true;
  // Which field: the first that does not parse on its own.
  for (const Field &g : graphFields) {
    onnx::GraphProto one;
    if (one.ParseFromString(
            std::string(bytes.data() + g.begin, g.end - g.begin)))
      continue;
    static const char *const names[] = {nullptr,
                                        "node",
                                        "name",
                                        nullptr,
                                        nullptr,
                                        "initializer",
                                        nullptr,
                                        nullptr,
                                        nullptr,
                                        nullptr,
                                        "doc_string",
                                        "input",
                                        "output",
                                        "value_info",
                                        "quantization_annotation",
                                        "sparse_initializer",
                                        "metadata_props"};
    const char *name =
        g.number > 0 && g.number < 17 ? names[g.number] : nullptr;
    error = "malformed protobuf: graph field " + std::to_string(g.number) +
            (name ? std::string(" (") + name + ")" : std::string()) +
            " at byte offset " + std::to_string(g.begin) + " does not parse";
    break;
  }
  return false;
}

llvm::Expected<ModelFile>
mlir::tp::detail::readModelFile(llvm::StringRef bytes) {
  ModelFile result;
  std::string error;
  if (!readModelFileInto(bytes, result, error))
    return llvm::createStringError(error);
  return result;
}
