//===- LayerLoops.cpp - repeated decoder layers as loops ------------------===//
//
// A decoder layer is found from the parameters its calls read
// (`...layers.N...` in the FQN of a load_param); the calls after the first
// one that reads layer N's parameters, up to the first that reads another
// layer's (or a parameter outside the layers), form layer N's range. This
// holds for every exporter, whose node names may not name the layer.
//
// Consecutive ranges (N, N+1, ...) roll into one loop when each makes the
// same calls as the first, operand for operand: a value of its own range at
// the same place, the same value from before the run, a parameter loaded
// with the same arguments but for those that become table columns, or a
// value of the previous range (then carried in a variable from one
// iteration to the next). A value read beyond the next range ends the run,
// so the loop never needs to keep a layer's values; the last layer's
// values that are read after the run leave the loop in variables too.
//
//===----------------------------------------------------------------------===//

#include "LayerLoops.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
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

/// N of a parameter FQN `...layers.N...` (the FQN is load_param's first
/// argument after the context, a quoted literal).
std::optional<int64_t> layerOf(emitc::CallOpaqueOp load) {
  ArrayAttr args = load.getArgsAttr();
  if (!args || args.size() < 2)
    return std::nullopt;
  auto fqn = dyn_cast<emitc::OpaqueAttr>(args[1]);
  if (!fqn)
    return std::nullopt;
  SmallVector<StringRef> parts;
  fqn.getValue().trim('"').split(parts, '.');
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    int64_t n;
    if (parts[i] == "layers" && !parts[i + 1].getAsInteger(10, n))
      return n;
  }
  return std::nullopt;
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

/// The C++ element type of a table of `attr` values, and how one prints;
/// failure for attributes that cannot vary between iterations (operand
/// references, shapes and other literals).
struct Column {
  Type type;       // what the loop loads
  std::string cxx; // the table's element type
  SmallVector<std::string> values;
};

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
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"')
      return std::make_pair(Type(emitc::PointerType::get(
                                emitc::OpaqueType::get(ctx, "const char"))),
                            std::string("const char *"));
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
    return llvm::formatv("{0:e16}", f.getValueAsDouble()).str();
  return cast<emitc::OpaqueAttr>(attr).getValue().str();
}

/// How a call's operand is found in its layer's range.
struct OperandClass {
  enum Kind { Inside, Param, Carried, Shared } kind;
  unsigned index = 0; // unit (Inside, Carried) or parameter slot (Param)
  Value value;        // the shared value; Carried: the first range's
  bool operator==(const OperandClass &o) const {
    return kind == o.kind && index == o.index && value == o.value;
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
  void roll(Run &run, unsigned id);

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
      if (auto load = asLoadParam(v.getDefiningOp()))
        read.push_back(layerOf(load).value_or(-1));
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
  const Range &first = run.ranges.front();
  const Range &prev = run.ranges.back();
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
  // The previous range becomes an inner one: what it computes is read by
  // itself or the next range only.
  for (unsigned u = prev.begin; u < prev.end; ++u)
    for (Operation *user : units[u].call->getUsers()) {
      auto at = placeOf(user);
      if (!at || (at->first != prevIndex &&
                  (at->first != prevIndex + 1 || at->second >= size)))
        return false;
    }
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
        cls = {OperandClass::Inside, tAt->second, {}};
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
        cls = {OperandClass::Param, s, {}};
      } else if (cAt && cAt->first == prevIndex) {
        // The previous layer's value: carried, starting from the value
        // the template reads.
        if (inRun(tAt))
          return false;
        auto [it, inserted] = grown.carriedInit.try_emplace(cAt->second, tv);
        if (!inserted && it->second != tv)
          return false;
        cls = {OperandClass::Carried, cAt->second, tv};
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

void Roller::roll(Run &run, unsigned id) {
  MLIRContext *ctx = func.getContext();
  const Range &first = run.ranges.front(), &last = run.ranges.back();
  unsigned size = first.end - first.begin;
  unsigned count = run.ranges.size();
  Location loc = units[first.begin].call.getLoc();
  unsigned lastIndex = run.first + count - 1;

  // Values of the last range read after the run leave in variables, as do
  // the carried ones.
  llvm::SmallSetVector<unsigned, 4> slots;
  for (auto &[unit, init] : run.carriedInit)
    slots.insert(unit);
  for (unsigned u = 0; u < size; ++u)
    for (Operation *user : units[last.begin + u].call->getUsers()) {
      auto at = placeOf(user);
      if (!at || at->first != lastIndex || at->second >= size)
        slots.insert(u);
    }

  // The tables, before the function.
  OpBuilder b(func);
  std::string prefix = llvm::formatv("tprt_layers{0}_", id).str();
  DenseMap<std::pair<int64_t, unsigned>, std::pair<std::string, Type>> tables;
  // Equal columns (an FQN that is also the initializer's name) share one.
  std::map<std::string, std::string> byContents;
  for (auto key : run.varying) {
    auto [owner, position] = key;
    Type type;
    std::string cxx, values;
    for (unsigned r = 0; r < count; ++r) {
      emitc::CallOpaqueOp call = owner >= 0
                                     ? units[run.ranges[r].begin + owner].call
                                     : run.paramsOf[r][~owner];
      Attribute attr = call.getArgsAttr()[position];
      if (!type)
        std::tie(type, cxx) = *columnType(attr);
      values += (r ? ", " : "") + columnValue(attr);
    }
    std::string &name = byContents[cxx + "\n" + values];
    if (name.empty()) {
      name = prefix + std::to_string(byContents.size() - 1);
      // `const char *const`, `const int64_t`.
      emitc::VerbatimOp::create(b, loc,
                                (cxx.back() == '*'
                                     ? "static " + cxx + "const "
                                     : "static const " + cxx + " ") +
                                    name + "[] = {" + values + "};");
    }
    tables[key] = {name, type};
  }

  // The loop, where the first range was.
  Operation *start = units[first.begin].comment
                         ? units[first.begin].comment.getOperation()
                         : units[first.begin].call.getOperation();
  b.setInsertionPoint(start);
  emitc::VerbatimOp::create(
      b, loc,
      llvm::formatv("// layers {0} to {1}: one loop, each layer's parameters "
                    "and differing arguments from the tables {2}*",
                    first.layer, last.layer, prefix)
          .str());
  Type index = b.getIndexType();
  Type tensorType = emitc::OpaqueType::get(ctx, "tprt::Tensor");
  auto constant = [&](int64_t v) -> Value {
    return emitc::ConstantOp::create(b, loc, index, b.getIndexAttr(v));
  };
  Value lower = constant(0), upper = constant(count), step = constant(1);
  DenseMap<unsigned, Value> variables;
  for (unsigned u : slots) {
    Type type = units[first.begin + u].call->getResult(0).getType();
    Value var = emitc::VariableOp::create(b, loc, emitc::LValueType::get(type),
                                          emitc::OpaqueAttr::get(ctx, ""));
    if (Value init = run.carriedInit.lookup(u))
      emitc::AssignOp::create(b, loc, var, init);
    variables[u] = var;
  }
  auto loop = emitc::ForOp::create(b, loc, lower, upper, step);
  b.setInsertionPointToStart(loop.getBody());
  Value iv = loop.getInductionVar();

  // One load per table and iteration.
  llvm::StringMap<Value> columns;
  auto column = [&](std::pair<int64_t, unsigned> key) -> Value {
    auto [name, type] = tables.lookup(key);
    Value &read = columns[name];
    if (read)
      return read;
    Value table = emitc::LiteralOp::create(
        b, loc, emitc::ArrayType::get({count}, type), name);
    Value element = emitc::SubscriptOp::create(
        b, loc, emitc::LValueType::get(type), table, ValueRange{iv});
    return read = emitc::LoadOp::create(b, loc, type, element);
  };
  // A call of the template with its varying arguments read from the tables.
  auto cloneCall = [&](emitc::CallOpaqueOp t, SmallVector<Value> operands,
                       int64_t key) -> Value {
    ArrayAttr args = t.getArgsAttr();
    SmallVector<Attribute> newArgs;
    if (args)
      for (auto [position, attr] : llvm::enumerate(args)) {
        if (!run.varying.contains({key, position})) {
          newArgs.push_back(attr);
          continue;
        }
        newArgs.push_back(b.getIndexAttr(operands.size()));
        operands.push_back(column({key, position}));
      }
    auto call = emitc::CallOpaqueOp::create(
        b, t.getLoc(), t->getResultTypes(), t.getCallee(), operands,
        args ? b.getArrayAttr(newArgs) : ArrayAttr());
    return call->getNumResults() ? call->getResult(0) : Value();
  };

  // A variable's value, leaving it empty: a loaded tensor is then freed
  // after its last reader, not when the variable is next assigned.
  auto take = [&](Value var) -> Value {
    Type type = cast<emitc::LValueType>(var.getType()).getValueType();
    Value v = emitc::LoadOp::create(b, loc, type, var);
    emitc::AssignOp::create(b, loc, var,
                            emitc::LiteralOp::create(b, loc, type,
                                                     type == tensorType
                                                         ? "tprt::Tensor()"
                                                         : "tprt::Tensors()"));
    return v;
  };
  SmallVector<Value> params(run.params.size());
  SmallVector<Value> inside(size);
  DenseMap<unsigned, Value> loaded;
  for (unsigned u = 0; u < size; ++u) {
    Unit &t = units[first.begin + u];
    SmallVector<Value> operands;
    for (unsigned i = 0; i < t.call.getNumOperands(); ++i) {
      // As every later range reads it; the first range's carried values
      // start as what it reads.
      const OperandClass &cls = run.classes.find({u, i})->second;
      switch (cls.kind) {
      case OperandClass::Inside:
        operands.push_back(inside[cls.index]);
        break;
      case OperandClass::Param:
        if (!params[cls.index])
          params[cls.index] =
              cloneCall(run.params[cls.index],
                        SmallVector<Value>(run.params[cls.index].getOperands()),
                        ~int64_t(cls.index));
        operands.push_back(params[cls.index]);
        break;
      case OperandClass::Carried: {
        Value &v = loaded[cls.index];
        if (!v)
          v = take(variables.lookup(cls.index));
        operands.push_back(v);
        break;
      }
      case OperandClass::Shared:
        operands.push_back(cls.value);
        break;
      }
    }
    if (t.comment)
      emitc::VerbatimOp::create(b, t.comment.getLoc(), t.comment.getValue());
    inside[u] = cloneCall(t.call, operands, u);
  }
  for (unsigned u : slots)
    emitc::AssignOp::create(b, loc, variables.lookup(u), inside[u]);

  // After the loop, the last layer's values read later come from their
  // variables; then the ranges go.
  b.setInsertionPointAfter(loop);
  for (unsigned u = 0; u < size; ++u) {
    Value old = units[last.begin + u].call->getNumResults()
                    ? units[last.begin + u].call->getResult(0)
                    : Value();
    if (!old || !slots.contains(u) || old.use_empty())
      continue;
    Value out = take(variables.lookup(u));
    old.replaceUsesWithIf(out, [&](OpOperand &use) {
      auto at = placeOf(use.getOwner());
      return !at || at->first != lastIndex || at->second >= size;
    });
  }
  for (unsigned u = last.end; u-- > first.begin;) {
    units[u].call.erase();
    if (units[u].comment)
      units[u].comment.erase();
  }
}

unsigned Roller::run() {
  if (!collectUnits())
    return 0;
  findRanges();
  std::vector<Run> runs;
  for (unsigned r = 0; r < ranges.size();) {
    Run current;
    current.first = r;
    current.ranges.push_back(ranges[r]);
    unsigned next = r + 1;
    while (next < ranges.size() &&
           ranges[next].begin == current.ranges.back().end &&
           ranges[next].layer == ranges[next - 1].layer + 1 &&
           extend(current, ranges[next]))
      ++next;
    if (current.ranges.size() >= 2)
      runs.push_back(std::move(current));
    r = next;
  }
  for (auto [id, run] : llvm::enumerate(runs))
    roll(run, firstId + id);
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
