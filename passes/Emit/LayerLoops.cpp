//===- LayerLoops.cpp - repeated decoder layers as loops ------------------===//
//
// A decoder layer is found from the parameters its calls read: each
// load_param carries the `tp.layer` of the ops that read its parameter
// (set by raising, kept by every pass, handed over by tp-to-emitc), as does
// each param_bucket_gather whose taken results a ZeRO stage 3 step reads;
// the calls after the first one that reads a layer-N parameter, up to the
// first that reads another layer's (or a parameter outside the layers),
// form layer N's range. Neither FQNs nor node names are parsed.
//
// Consecutive ranges of distinct layers (0, 1, 2, ... in a forward pass;
// N-1, ..., 0 in a backward pass; FQN order in an init) roll into one loop
// when each makes the same calls as the first, operand for operand: a value
// of its own range at the same place, the same value from before the run,
// a parameter loaded with the same arguments but for those that become
// table columns, a value of the previous range (carried in a variable from
// one iteration to the next), or a value an earlier loop computed for a
// layer at the same distance (the backward reading its layer's forward).
// What a layer computes and something reads beyond the next layer is kept
// per iteration in an array, read by the later loop through a table of
// iteration numbers, and emptied there when that is its only reader, so a
// training step frees each layer's activations after its backward as the
// straight-line code did. The last layer's values read after the loop
// leave it in variables.
//
//===----------------------------------------------------------------------===//

#include "LayerLoops.h"

#include "CppLiterals.h"
#include "tpopt/Dialect/TP/TPUtils.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;

namespace {

constexpr StringLiteral kLoadParam = "tprt::load_param";

emitc::CallOpaqueOp asLoadParam(Operation *op) {
  auto call = dyn_cast_or_null<emitc::CallOpaqueOp>(op);
  return call && call.getCallee() == kLoadParam ? call : emitc::CallOpaqueOp();
}

/// The decoder layer of a load_param call: its parameter's (tp-to-emitc
/// sets it from the layer of the ops that read the parameter).
std::optional<int64_t> layerOf(emitc::CallOpaqueOp load) {
  return tp::decoderLayerOf(load);
}

/// Whether `v` is a parameter, and then its decoder layer (none: outside
/// the layers): a load_param's result, or one taken from a
/// param_bucket_gather's (ZeRO stage 3, whose gather carries the layer).
std::optional<std::optional<int64_t>> parameterLayer(Value v) {
  if (auto load = asLoadParam(v.getDefiningOp()))
    return layerOf(load);
  auto take = dyn_cast_or_null<emitc::CallOpaqueOp>(v.getDefiningOp());
  if (!take || take.getCallee() != "tprt::take" || take.getNumOperands() != 1)
    return std::nullopt;
  auto gather =
      dyn_cast_or_null<emitc::CallOpaqueOp>(take.getOperand(0).getDefiningOp());
  if (!gather || gather.getCallee() != "tprt::param_bucket_gather")
    return std::nullopt;
  return tp::decoderLayerOf(gather);
}

/// A comment of the first layer's calls for every layer: `layers.N` (the
/// node names of TorchScript exports, `/model/layers.0/mlp/...`) becomes
/// `layers.*`.
std::string anyLayer(StringRef comment, int64_t layer) {
  std::string from = "layers." + std::to_string(layer);
  std::string out;
  while (!comment.empty()) {
    size_t at = comment.find(from);
    if (at == StringRef::npos) {
      out += comment.str();
      break;
    }
    StringRef rest = comment.drop_front(at + from.size());
    out += comment.take_front(at).str();
    if (!rest.empty() && isdigit(static_cast<unsigned char>(rest.front())))
      out += from;
    else
      out += "layers.*";
    comment = rest;
  }
  return out;
}

/// An empty tensor (or list of tensors) of `type`, to clear a variable or
/// an array element with.
Value emptyOf(OpBuilder &b, Location loc, Type type) {
  auto opaque = dyn_cast<emitc::OpaqueType>(type);
  return emitc::LiteralOp::create(b, loc, type,
                                  opaque && opaque.getValue() == "tprt::Tensors"
                                      ? "tprt::Tensors()"
                                      : "tprt::Tensor()");
}

/// One call, with the comment (the ONNX node) printed before it.
struct Unit {
  emitc::VerbatimOp comment;
  emitc::CallOpaqueOp call;
};

/// A layer's calls: units [begin, end) of the function.
struct Range {
  int64_t layer;
  unsigned begin, end;
};

/// The type the loop loads from a table of `attr` values and the table's
/// C++ element type; failure for attributes that cannot vary between
/// iterations (operand references, shapes and other literals).
FailureOr<std::pair<Type, std::string>> columnType(Attribute attr) {
  MLIRContext *ctx = attr.getContext();
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    Type t = i.getType();
    if (t.isInteger(1))
      return std::make_pair(t, std::string("bool"));
    if (t.isInteger(32))
      return std::make_pair(t, std::string("int32_t"));
    if (t.isInteger(64))
      return std::make_pair(t, std::string("int64_t"));
    return failure();
  }
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    if (f.getType().isF64())
      return std::make_pair(f.getType(), std::string("double"));
    return failure();
  }
  if (auto o = dyn_cast<emitc::OpaqueAttr>(attr)) {
    StringRef s = o.getValue();
    // A non-finite double (cppDoubleLiteral) is a double like the others.
    if (s.ltrim('-').starts_with("std::numeric_limits<double>::"))
      return std::make_pair(Type(Float64Type::get(ctx)), std::string("double"));
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"')
      return std::make_pair(Type(emitc::PointerType::get(
                                emitc::OpaqueType::get(ctx, "const char"))),
                            std::string("const char *"));
    // A list of strings (a bucket's FQNs, one decoder layer's per row).
    if (s.starts_with("{\"") && s.ends_with("\"}"))
      return std::make_pair(
          Type(emitc::OpaqueType::get(ctx, "std::vector<std::string>")),
          std::string("std::vector<std::string>"));
  }
  return failure();
}

std::string columnValue(Attribute attr) {
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    if (i.getType().isInteger(1))
      return i.getValue().isZero() ? "false" : "true";
    return std::to_string(i.getValue().getSExtValue());
  }
  if (auto f = dyn_cast<FloatAttr>(attr))
    return tp::cppDoubleLiteral(f.getValueAsDouble());
  return cast<emitc::OpaqueAttr>(attr).getValue().str();
}

/// A value of a rolled run, by layer: the value unit `unit` computes in
/// layer `layer` (`in`: the value carried into layer `layer` in unit
/// `unit`'s variable, which for the run's first layer is its initial
/// value).
struct Identity {
  unsigned run;
  bool in;
  unsigned unit;
  int64_t layer;
};

/// How a call's operand is found in its layer's range.
struct OperandClass {
  enum Kind { Inside, Param, Carried, Shared, Saved } kind;
  /// Inside, Carried, Saved: the unit; Param: the parameter slot.
  unsigned index = 0;
  /// Shared: the value; Carried: the first range's.
  Value value;
  /// Saved: the earlier run, and the layer read relative to this one's.
  unsigned run = 0;
  bool in = false;
  int64_t offset = 0;
  bool operator==(const OperandClass &o) const {
    return kind == o.kind && index == o.index && value == o.value &&
           run == o.run && in == o.in && offset == o.offset;
  }
};

/// A run being grown: the template (the first range), what its operands
/// are in every later range, the parameter slots and the columns.
struct Run {
  /// Ranges [first, first + ranges.size()) of the function.
  unsigned first = 0;
  SmallVector<Range> ranges;
  /// (unit, operand) -> class, as the ranges after the first read it.
  DenseMap<std::pair<unsigned, unsigned>, OperandClass> classes;
  /// The template's load_param calls, in the order it first reads them.
  SmallVector<emitc::CallOpaqueOp> params;
  /// Per range: parameter slot -> its load_param call.
  SmallVector<SmallVector<emitc::CallOpaqueOp>> paramsOf;
  /// (unit or ~slot, argument position) of every varying argument.
  llvm::SetVector<std::pair<int64_t, unsigned>> varying;
  /// Carried unit -> the first range's value (from before the run).
  DenseMap<unsigned, Value> carriedInit;

  unsigned size() const { return ranges.front().end - ranges.front().begin; }
  /// The iteration that computes layer `layer`.
  int64_t iterationOf(int64_t layer) const {
    return llvm::find_if(ranges,
                         [&](const Range &r) { return r.layer == layer; }) -
           ranges.begin();
  }
};

class Roller {
public:
  Roller(emitc::FuncOp func, unsigned firstId) : func(func), firstId(firstId) {}
  unsigned run();

private:
  bool collectUnits();
  void findRanges();
  bool extend(Run &run, const Range &next);
  bool sameCall(Run &run, emitc::CallOpaqueOp t, emitc::CallOpaqueOp c,
                int64_t key);
  std::optional<Identity> identityOf(Value v) const;
  Value arrayOf(unsigned run, bool in, unsigned unit);
  void roll(unsigned index);
  void releaseSavedValues();
  class LoopEmitter;

  /// The range index and unit of a call inside some range.
  std::optional<std::pair<unsigned, unsigned>> placeOf(Operation *op) const {
    auto it = place.find(op);
    if (it == place.end())
      return std::nullopt;
    return it->second;
  }

  emitc::FuncOp func;
  unsigned firstId;
  SmallVector<Unit> units;
  SmallVector<Range> ranges;
  DenseMap<Operation *, std::pair<unsigned, unsigned>> place;
  /// The runs found, and the run of each of their ranges.
  std::vector<Run> runs;
  DenseMap<unsigned, unsigned> runOfRange;
  /// Per (run, in, unit): the array of that value per iteration, for what
  /// reads it after the next layer.
  std::map<std::tuple<unsigned, bool, unsigned>, Value> arrays;
};

bool Roller::collectUnits() {
  if (func.getBody().empty() || !func.getBody().hasOneBlock())
    return false;
  emitc::VerbatimOp pending;
  for (Operation &op : func.getBody().front()) {
    if (asLoadParam(&op))
      continue;
    if (auto comment = dyn_cast<emitc::VerbatimOp>(op)) {
      pending = comment;
      continue;
    }
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    auto call = dyn_cast<emitc::CallOpaqueOp>(op);
    // Anything else (already rolled, hand-written): leave the function.
    if (!call || call->getNumResults() > 1)
      return false;
    units.push_back({pending, call});
    pending = {};
  }
  return true;
}

void Roller::findRanges() {
  int64_t current = -1;
  for (auto [index, unit] : llvm::enumerate(units)) {
    // The one layer whose parameters it reads; -1 for parameters outside
    // the layers or of several.
    SmallVector<int64_t> read;
    for (Value v : unit.call.getOperands())
      if (std::optional<std::optional<int64_t>> layer = parameterLayer(v))
        read.push_back(layer->value_or(-1));
    if (!read.empty())
      current = llvm::all_equal(read) ? read.front() : -1;
    if (current < 0)
      continue;
    if (!ranges.empty() && ranges.back().end == index &&
        ranges.back().layer == current) {
      ++ranges.back().end;
      continue;
    }
    ranges.push_back({current, static_cast<unsigned>(index),
                      static_cast<unsigned>(index) + 1});
  }
  for (auto [r, range] : llvm::enumerate(ranges))
    for (unsigned u = range.begin; u < range.end; ++u)
      place[units[u].call] = {static_cast<unsigned>(r), u - range.begin};
}

std::optional<Identity> Roller::identityOf(Value v) const {
  if (auto at = placeOf(v.getDefiningOp())) {
    auto it = runOfRange.find(at->first);
    if (it == runOfRange.end())
      return std::nullopt;
    const Run &run = runs[it->second];
    unsigned k = at->first - run.first;
    if (at->second >= run.size())
      return std::nullopt;
    int64_t layer = run.ranges[k].layer;
    // What the next layer reads from its variable.
    if (run.carriedInit.count(at->second) && k + 1 < run.ranges.size())
      return Identity{it->second, true, at->second, run.ranges[k + 1].layer};
    return Identity{it->second, false, at->second, layer};
  }
  for (auto [r, run] : llvm::enumerate(runs))
    for (auto &[unit, init] : run.carriedInit)
      if (init == v)
        return Identity{static_cast<unsigned>(r), true, unit,
                        run.ranges.front().layer};
  return std::nullopt;
}

/// Whether call `c` (in a later range) matches the template's call `t`;
/// arguments that differ become columns keyed by `key` (a unit, or ~slot
/// for a parameter's load_param).
bool Roller::sameCall(Run &run, emitc::CallOpaqueOp t, emitc::CallOpaqueOp c,
                      int64_t key) {
  if (t.getCallee() != c.getCallee() ||
      t.getNumOperands() != c.getNumOperands() ||
      t->getResultTypes() != c->getResultTypes())
    return false;
  ArrayAttr ta = t.getArgsAttr(), ca = c.getArgsAttr();
  if (!ta || !ca)
    return ta == ca;
  if (ta.size() != ca.size())
    return false;
  for (unsigned i = 0; i < ta.size(); ++i) {
    if (ta[i] == ca[i])
      continue;
    auto tt = columnType(ta[i]), ct = columnType(ca[i]);
    if (failed(tt) || failed(ct) || tt->first != ct->first)
      return false;
    run.varying.insert({key, i});
  }
  return true;
}

bool Roller::extend(Run &run, const Range &next) {
  // Layers in any order (a backward pass, an init in FQN order), each
  // once.
  const Range &first = run.ranges.front();
  if (llvm::any_of(run.ranges,
                   [&](const Range &r) { return r.layer == next.layer; }))
    return false;
  // A longer range (the last layer, followed by calls that read no
  // parameter) contributes its first calls; the rest follow the loop.
  unsigned size = first.end - first.begin;
  if (next.end - next.begin < size)
    return false;
  unsigned prevIndex = run.first + run.ranges.size() - 1;
  auto inRun = [&](std::optional<std::pair<unsigned, unsigned>> at) {
    return at && at->first >= run.first &&
           (at->first <= prevIndex ||
            (at->first == prevIndex + 1 && at->second < size));
  };
  Run grown = run;
  SmallVector<emitc::CallOpaqueOp> slots(grown.params.size());
  for (unsigned u = 0; u < size; ++u) {
    Unit &t = units[first.begin + u], &c = units[next.begin + u];
    if (static_cast<bool>(t.comment) != static_cast<bool>(c.comment) ||
        !sameCall(grown, t.call, c.call, u))
      return false;
    for (unsigned i = 0; i < t.call.getNumOperands(); ++i) {
      Value tv = t.call.getOperand(i), cv = c.call.getOperand(i);
      auto tAt = placeOf(tv.getDefiningOp());
      auto cAt = placeOf(cv.getDefiningOp());
      OperandClass cls;
      if (tAt && tAt->first == run.first) {
        // Inside the template: the same unit inside this range.
        if (!cAt || cAt->first != prevIndex + 1 || cAt->second != tAt->second)
          return false;
        cls = {OperandClass::Inside, tAt->second};
      } else if (auto tLoad = asLoadParam(tv.getDefiningOp())) {
        auto cLoad = asLoadParam(cv.getDefiningOp());
        if (!cLoad)
          return false;
        auto *slot = llvm::find(grown.params, tLoad);
        unsigned s = slot - grown.params.begin();
        if (slot == grown.params.end()) {
          grown.params.push_back(tLoad);
          slots.push_back({});
          for (auto &earlier : grown.paramsOf)
            earlier.push_back({});
        }
        if (slots[s] && slots[s] != cLoad)
          return false;
        if (!slots[s] && !sameCall(grown, tLoad, cLoad, ~int64_t(s)))
          return false;
        slots[s] = cLoad;
        cls = {OperandClass::Param, s};
      } else if (cAt && cAt->first == prevIndex) {
        // The previous layer's value: carried, starting from the value
        // the template reads.
        if (inRun(tAt))
          return false;
        auto [it, inserted] = grown.carriedInit.try_emplace(cAt->second, tv);
        if (!inserted && it->second != tv)
          return false;
        cls = {OperandClass::Carried, cAt->second, tv};
      } else if (auto tId = identityOf(tv), cId = identityOf(cv);
                 tId && cId && tId->run == cId->run && tId->in == cId->in &&
                 tId->unit == cId->unit &&
                 cId->layer - tId->layer == next.layer - first.layer) {
        // A value an earlier loop computed for a layer at the same
        // distance (the backward reading its layer's forward): kept there
        // per iteration.
        cls = {OperandClass::Saved, tId->unit};
        cls.run = tId->run;
        cls.in = tId->in;
        cls.offset = tId->layer - first.layer;
      } else {
        if (inRun(tAt) || inRun(cAt) || tv != cv)
          return false;
        cls = {OperandClass::Shared, 0, tv};
      }
      auto [it, inserted] = grown.classes.try_emplace({u, i}, cls);
      if (!inserted && !(it->second == cls))
        return false;
    }
  }
  // Every slot of the template is read by every range.
  if (llvm::is_contained(slots, emitc::CallOpaqueOp()))
    return false;
  if (grown.paramsOf.empty()) {
    // The template's own parameters.
    grown.paramsOf.push_back(grown.params);
  }
  grown.paramsOf.push_back(slots);
  grown.ranges.push_back({next.layer, next.begin, next.begin + size});
  run = std::move(grown);
  return true;
}

/// The array of `run`'s value `unit` per iteration, declared at the start
/// of the function.
Value Roller::arrayOf(unsigned run, bool in, unsigned unit) {
  Value &array = arrays[{run, in, unit}];
  if (!array) {
    const Run &r = runs[run];
    Type type =
        units[r.ranges.front().begin + unit].call->getResult(0).getType();
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    array = emitc::VariableOp::create(
        b, func.getLoc(),
        emitc::ArrayType::get({static_cast<int64_t>(r.ranges.size())}, type),
        emitc::OpaqueAttr::get(func.getContext(), ""));
  }
  return array;
}

/// Rolling one run: the tables of its varying arguments (before the
/// function), the loop where its first range was (variables for what
/// leaves it, one iteration reading the tables), then the reads after it
/// rewired and the ranges erased.
class Roller::LoopEmitter {
public:
  LoopEmitter(Roller &roller, unsigned index)
      : roller(roller), index(index), run(roller.runs[index]),
        first(run.ranges.front()), last(run.ranges.back()), size(run.size()),
        count(run.ranges.size()), loc(roller.units[first.begin].call.getLoc()),
        ctx(roller.func.getContext()), b(roller.func), atModule(roller.func),
        prefix(llvm::formatv("tprt_layers{0}_", roller.firstId + index).str()) {
  }

  void emit() {
    findEscapes();
    emitTables();
    emitLoopStart();
    emitBody();
    rewireAfterLoop();
  }

private:
  /// A value read after the loop from an array element.
  struct Read {
    OpOperand *use;
    Value array;
    int64_t element;
  };

  void findEscapes();
  void emitTables();
  std::string table(const std::string &cxx, const std::string &values);
  std::string elementTable(const OperandClass &cls);
  void emitLoopStart();
  void emitBody();
  Value operandOf(const OperandClass &cls);
  void rewireAfterLoop();

  Value constant(int64_t v) {
    return emitc::ConstantOp::create(b, loc, b.getIndexType(),
                                     b.getIndexAttr(v));
  }
  Value element(Value array, Value at) {
    auto type = cast<emitc::ArrayType>(array.getType()).getElementType();
    return emitc::SubscriptOp::create(b, loc, emitc::LValueType::get(type),
                                      array, ValueRange{at});
  }
  /// One load per table and iteration.
  Value column(StringRef name, Type type) {
    Value &read = columns[name];
    if (read)
      return read;
    Value table = emitc::LiteralOp::create(
        b, loc, emitc::ArrayType::get({count}, type), name);
    return read = emitc::LoadOp::create(b, loc, type, element(table, iv));
  }
  Value cloneCall(emitc::CallOpaqueOp t, SmallVector<Value> operands,
                  int64_t key);
  /// A variable's value, leaving it empty: a loaded tensor is then freed
  /// after its last reader, not when the variable is next assigned.
  Value take(Value var) {
    Type type = cast<emitc::LValueType>(var.getType()).getValueType();
    Value v = emitc::LoadOp::create(b, loc, type, var);
    emitc::AssignOp::create(b, loc, var, emptyOf(b, loc, type));
    return v;
  }

  Roller &roller;
  unsigned index;
  Run &run;
  const Range &first, &last;
  unsigned size, count;
  Location loc;
  MLIRContext *ctx;
  OpBuilder b, atModule;
  std::string prefix;
  /// Units whose values leave the loop in variables (the carried ones and
  /// the last layer's read later), and the earlier layers' values read
  /// later from arrays.
  llvm::SmallSetVector<unsigned, 4> slots;
  SmallVector<Read> reads;
  /// Equal columns (an FQN that is also the initializer's name) share one.
  std::map<std::string, std::string> byContents;
  DenseMap<std::pair<int64_t, unsigned>, std::pair<std::string, Type>> tables;
  DenseMap<unsigned, Value> variables;
  emitc::ForOp loop;
  Value iv;
  llvm::StringMap<Value> columns;
  /// What the layer is handed (carried), its parameters and its values.
  DenseMap<unsigned, Value> loaded;
  SmallVector<Value> params, inside;
  /// One load per array element and iteration.
  DenseMap<std::pair<Value, Value>, Value> saved;
};

void Roller::LoopEmitter::findEscapes() {
  // What reads this run's values outside their layer and the next: the
  // last layer's values leave the loop in variables (as do the carried
  // ones), the others are kept per iteration in arrays.
  for (auto &[unit, init] : run.carriedInit)
    slots.insert(unit);
  for (unsigned k = 0; k < count; ++k)
    for (unsigned u = 0; u < size; ++u) {
      emitc::CallOpaqueOp call = roller.units[run.ranges[k].begin + u].call;
      if (!call->getNumResults())
        continue;
      for (OpOperand &use : call->getResult(0).getUses()) {
        auto at = roller.placeOf(use.getOwner());
        bool inLoop = at && at->second < size && at->first >= run.first &&
                      at->first < run.first + count;
        if (inLoop &&
            (at->first == run.first + k || at->first == run.first + k + 1))
          continue;
        if (k + 1 == count) {
          slots.insert(u);
          continue;
        }
        bool in = run.carriedInit.count(u);
        reads.push_back({&use, roller.arrayOf(index, in, u), in ? k + 1 : k});
      }
    }
}

std::string Roller::LoopEmitter::table(const std::string &cxx,
                                       const std::string &values) {
  std::string &name = byContents[cxx + "\n" + values];
  if (name.empty()) {
    name = prefix + std::to_string(byContents.size() - 1);
    // `const char *const`, `const int64_t`.
    emitc::VerbatimOp::create(atModule, loc,
                              (cxx.back() == '*'
                                   ? "static " + cxx + "const "
                                   : "static const " + cxx + " ") +
                                  name + "[] = {" + values + "};");
  }
  return name;
}

/// Which iteration of an earlier loop holds the value each iteration
/// reads.
std::string Roller::LoopEmitter::elementTable(const OperandClass &cls) {
  std::string values;
  for (unsigned r = 0; r < count; ++r)
    values += (r ? ", " : "") + std::to_string(roller.runs[cls.run].iterationOf(
                                    run.ranges[r].layer + cls.offset));
  return table("int64_t", values);
}

void Roller::LoopEmitter::emitTables() {
  for (auto key : run.varying) {
    auto [owner, position] = key;
    Type type;
    std::string cxx, values;
    for (unsigned r = 0; r < count; ++r) {
      emitc::CallOpaqueOp call =
          owner >= 0 ? roller.units[run.ranges[r].begin + owner].call
                     : run.paramsOf[r][~owner];
      Attribute attr = call.getArgsAttr()[position];
      if (!type)
        std::tie(type, cxx) = *columnType(attr);
      values += (r ? ", " : "") + columnValue(attr);
    }
    tables[key] = {table(cxx, values), type};
  }
}

void Roller::LoopEmitter::emitLoopStart() {
  // The loop, where the first range was.
  Unit &start = roller.units[first.begin];
  b.setInsertionPoint(start.comment ? start.comment.getOperation()
                                    : start.call.getOperation());
  emitc::VerbatimOp::create(
      b, loc,
      llvm::formatv("// {0} layers ({1} first, {2} last): one loop, each "
                    "layer's parameters and differing arguments from the "
                    "tables {3}*",
                    count, first.layer, last.layer, prefix)
          .str());
  Value lower = constant(0), upper = constant(count), one = constant(1);
  for (unsigned u : slots) {
    Type type = roller.units[first.begin + u].call->getResult(0).getType();
    Value var = emitc::VariableOp::create(b, loc, emitc::LValueType::get(type),
                                          emitc::OpaqueAttr::get(ctx, ""));
    if (Value init = run.carriedInit.lookup(u))
      emitc::AssignOp::create(b, loc, var, init);
    variables[u] = var;
  }
  loop = emitc::ForOp::create(b, loc, lower, upper, one);
  b.setInsertionPointToStart(loop.getBody());
  iv = loop.getInductionVar();
}

/// A call of the template with its varying arguments read from the tables.
Value Roller::LoopEmitter::cloneCall(emitc::CallOpaqueOp t,
                                     SmallVector<Value> operands, int64_t key) {
  ArrayAttr args = t.getArgsAttr();
  SmallVector<Attribute> newArgs;
  if (args)
    for (auto [position, attr] : llvm::enumerate(args)) {
      if (!run.varying.contains({key, position})) {
        newArgs.push_back(attr);
        continue;
      }
      newArgs.push_back(b.getIndexAttr(operands.size()));
      auto [name, type] = tables.lookup({key, position});
      operands.push_back(column(name, type));
    }
  auto call = emitc::CallOpaqueOp::create(
      b, t.getLoc(), t->getResultTypes(), t.getCallee(), operands,
      args ? b.getArrayAttr(newArgs) : ArrayAttr());
  // What tp-to-emitc still decides (a consuming form) comes along.
  call->setDiscardableAttrs(t->getDiscardableAttrDictionary());
  return call->getNumResults() ? call->getResult(0) : Value();
}

/// An operand of the template as every later range reads it; the first
/// range's carried values start as what it reads.
Value Roller::LoopEmitter::operandOf(const OperandClass &cls) {
  switch (cls.kind) {
  case OperandClass::Inside:
    return inside[cls.index];
  case OperandClass::Param: {
    Value &param = params[cls.index];
    if (!param)
      param = cloneCall(run.params[cls.index],
                        SmallVector<Value>(run.params[cls.index].getOperands()),
                        ~int64_t(cls.index));
    return param;
  }
  case OperandClass::Carried:
    return loaded.lookup(cls.index);
  case OperandClass::Shared:
    return cls.value;
  case OperandClass::Saved: {
    Value array = roller.arrayOf(cls.run, cls.in, cls.index);
    Value at = column(elementTable(cls), b.getI64Type());
    Value &v = saved[{array, at}];
    if (!v)
      v = emitc::LoadOp::create(
          b, loc, cast<emitc::ArrayType>(array.getType()).getElementType(),
          element(array, at));
    return v;
  }
  }
  return Value();
}

void Roller::LoopEmitter::emitBody() {
  // What the layer is handed, kept for later loops when they read it.
  for (unsigned u : slots)
    if (run.carriedInit.count(u)) {
      loaded[u] = take(variables.lookup(u));
      if (roller.arrays.count({index, true, u}))
        emitc::AssignOp::create(
            b, loc, element(roller.arrays[{index, true, u}], iv), loaded[u]);
    }
  params.assign(run.params.size(), Value());
  inside.assign(size, Value());
  for (unsigned u = 0; u < size; ++u) {
    Unit &t = roller.units[first.begin + u];
    SmallVector<Value> operands;
    for (unsigned i = 0; i < t.call.getNumOperands(); ++i)
      operands.push_back(operandOf(run.classes.find({u, i})->second));
    if (t.comment)
      emitc::VerbatimOp::create(b, t.comment.getLoc(),
                                anyLayer(t.comment.getValue(), first.layer));
    inside[u] = cloneCall(t.call, operands, u);
    if (auto it = roller.arrays.find({index, false, u});
        it != roller.arrays.end())
      emitc::AssignOp::create(b, loc, element(it->second, iv), inside[u]);
  }
  for (unsigned u : slots)
    emitc::AssignOp::create(b, loc, variables.lookup(u), inside[u]);
}

void Roller::LoopEmitter::rewireAfterLoop() {
  // After the loop, the last layer's values read later come from their
  // variables, the others from the arrays; then the ranges go.
  b.setInsertionPointAfter(loop);
  unsigned lastIndex = run.first + count - 1;
  for (unsigned u = 0; u < size; ++u) {
    emitc::CallOpaqueOp call = roller.units[last.begin + u].call;
    if (!call->getNumResults() || !slots.contains(u))
      continue;
    Value old = call->getResult(0);
    Value out = take(variables.lookup(u));
    old.replaceUsesWithIf(out, [&](OpOperand &use) {
      auto at = roller.placeOf(use.getOwner());
      return !at || at->first != lastIndex || at->second >= size;
    });
  }
  for (Read &read : reads) {
    b.setInsertionPoint(read.use->getOwner());
    read.use->set(
        emitc::LoadOp::create(b, loc, read.use->get().getType(),
                              element(read.array, constant(read.element))));
  }
  for (unsigned u = last.end; u-- > first.begin;) {
    roller.units[u].call.erase();
    if (roller.units[u].comment)
      roller.units[u].comment.erase();
  }
}

void Roller::roll(unsigned index) { LoopEmitter(*this, index).emit(); }

/// An array element read in one place only is emptied there, so that a
/// training step frees each layer's activations after its backward as the
/// straight-line code did.
void Roller::releaseSavedValues() {
  for (auto &[key, array] : arrays) {
    SmallVector<emitc::LoadOp> loads;
    bool elsewhere = false;
    for (Operation *user : array.getUsers())
      for (Operation *access : user->getUsers())
        if (auto load = dyn_cast<emitc::LoadOp>(access))
          loads.push_back(load);
        else if (!isa<emitc::AssignOp>(access))
          elsewhere = true;
    // One read in a loop reads each element once; reads outside loops
    // read the elements their constant indices name.
    bool inLoop = llvm::any_of(loads, [](emitc::LoadOp load) {
      return load->getParentOfType<emitc::ForOp>();
    });
    if (elsewhere || (inLoop && loads.size() != 1))
      continue;
    auto indexOf = [](emitc::LoadOp load) {
      auto access = load.getOperand().getDefiningOp<emitc::SubscriptOp>();
      return access ? access.getIndices().front() : Value();
    };
    // Constant indices are distinct constants: compare their values.
    auto constantOf = [](Value v) -> std::optional<int64_t> {
      if (auto c = v.getDefiningOp<emitc::ConstantOp>())
        if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
          return i.getInt();
      return std::nullopt;
    };
    std::map<int64_t, unsigned> perElement;
    for (emitc::LoadOp load : loads)
      if (auto c = constantOf(indexOf(load)))
        ++perElement[*c];
    for (emitc::LoadOp load : loads) {
      auto c = constantOf(indexOf(load));
      // A loop's read empties its element when the element changes with
      // the iteration; one element read by every iteration is kept.
      if (inLoop ? c.has_value() : (!c || perElement[*c] != 1))
        continue;
      OpBuilder b(load->getContext());
      b.setInsertionPointAfter(load);
      auto access = load.getOperand().getDefiningOp<emitc::SubscriptOp>();
      emitc::AssignOp::create(b, load.getLoc(), access,
                              emptyOf(b, load.getLoc(), load.getType()));
    }
  }
}

unsigned Roller::run() {
  if (!collectUnits())
    return 0;
  findRanges();
  for (unsigned r = 0; r < ranges.size();) {
    Run current;
    current.first = r;
    current.ranges.push_back(ranges[r]);
    unsigned next = r + 1;
    while (next < ranges.size() &&
           ranges[next].begin == current.ranges.back().end &&
           extend(current, ranges[next]))
      ++next;
    if (current.ranges.size() >= 2) {
      for (unsigned k = 0; k < current.ranges.size(); ++k)
        runOfRange[r + k] = runs.size();
      runs.push_back(std::move(current));
    }
    r = next;
  }
  // The last loop first: a loop reads the arrays an earlier one fills,
  // and the earlier one's calls go once nothing reads them.
  for (unsigned r = runs.size(); r-- > 0;)
    roll(r);
  releaseSavedValues();
  // Parameters now loaded inside the loops only.
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front()))
    if (asLoadParam(&op) && op.use_empty())
      op.erase();
  return runs.size();
}

} // namespace

unsigned mlir::tp::rollLayerLoops(emitc::FuncOp func, unsigned firstId) {
  return Roller(func, firstId).run();
}
