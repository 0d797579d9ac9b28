//===- Mamba2.cpp - NemotronH's Mamba2 mixer ------------------------------===//
//
// A Mamba2 mixer is raised as one block: its nodes (the module scope of a
// depthwise Conv whose scope ends in "mixer") are not interpreted one by
// one; at the block's last node it is matched as a whole from what it reads
// (parameters by their consumers, the input activation, the mask), its sizes
// and its constants.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

/// What the block reads and computes, as it is found.
struct Raiser::Mamba2Params {
  llvm::SmallPtrSet<Operation *, 32> inside;
  Abstract *x = nullptr;
  bool usesMask = false;
  Abstract *inProj = nullptr, *outProj = nullptr, *convW = nullptr,
           *convB = nullptr, *aLog = nullptr, *dtBias = nullptr,
           *dParam = nullptr, *normW = nullptr;
  bool inT = false, outT = false, foldedA = false;
  int64_t heads = 0, inner = 0, conv = 0, kernel = 0, groups = 0, state = 0,
          hidden = 0;
  double eps = 0.0, dtMin = 0.0;
  Value output;
};

void Raiser::findScopeBlocks() {
  // A Mamba2 mixer: the module scope of a depthwise Conv whose scope ends in
  // "mixer". Every node in that scope or below belongs to it.
  SmallVector<std::string> scopes;
  for (Operation &op : source.getBody().front())
    if (auto node = dyn_cast<NodeOp>(op))
      if (node.getOpType() == "Conv") {
        std::string scope = scopeOf(node);
        if (StringRef(scope).ends_with("mixer") &&
            !llvm::is_contained(scopes, scope))
          scopes.push_back(scope);
      }
  for (const std::string &scope : scopes) {
    llvm::SmallPtrSet<Operation *, 32> members;
    for (Operation &op : source.getBody().front())
      if (auto node = dyn_cast<NodeOp>(op)) {
        StringRef s = node.getScopeAttr() ? node.getScopeAttr().getValue() : "";
        if (s == scope || s.starts_with(scope + "."))
          members.insert(node);
      }
    // Nodes an exporter's optimizer created without a scope (dynamo's
    // Split, Concat of constants) that read the block's values belong to it.
    bool grew = true;
    while (grew) {
      grew = false;
      for (Operation &op : source.getBody().front()) {
        auto node = dyn_cast<NodeOp>(op);
        if (!node || node.getScopeAttr() || members.contains(node))
          continue;
        if (llvm::any_of(node.getInputs(), [&](Value v) {
              return v.getDefiningOp() && members.contains(v.getDefiningOp());
            })) {
          members.insert(node);
          grew = true;
        }
      }
    }
    ScopeBlock block;
    block.scope = scope;
    for (Operation &op : source.getBody().front())
      if (members.contains(&op))
        block.nodes.push_back(cast<NodeOp>(op));
    for (NodeOp node : block.nodes)
      blockOf[node] = scopeBlocks.size();
    scopeBlocks.push_back(std::move(block));
  }
}

static InFlightDiagnostic blockError(Raiser &r, Raiser::ScopeBlock &block) {
  return r.nodeError(block.nodes.back())
         << "Mamba2 mixer '" << block.scope << "': ";
}

static int64_t numelOf(Raiser &r, Abstract *p) {
  return cast<ShapedType>(r.source.getArgument(p->argIndex).getType())
      .getNumElements();
}

static ArrayRef<int64_t> shapeOf(Raiser &r, Abstract *p) {
  return cast<RankedTensorType>(r.source.getArgument(p->argIndex).getType())
      .getShape();
}

/// The scalar a node inside the block reads: a known value or a Constant.
static std::optional<double> scalarIn(Raiser &r, NodeOp node) {
  for (Value in : node.getInputs())
    if (Abstract *a = r.lookup(in);
        a && Raiser::isConcrete(a) && a->probe->isScalarLike())
      return a->probe->scalar();
  for (Value in : node.getInputs())
    if (auto c = in.getDefiningOp<NodeOp>())
      if (c.getOpType() == "Constant")
        if (auto v = c.getOnnxAttrs().getAs<DenseElementsAttr>("value"))
          if (v.getNumElements() == 1)
            return ProbeTensor::fromAttr(v).scalar();
  return std::nullopt;
}

LogicalResult Raiser::findMamba2Params(ScopeBlock &block, Mamba2Params &p) {
  // The parameter behind an operand: a function argument, possibly through
  // casts, reshapes and a transpose inside the block.
  auto paramBehind = [&](Value v, bool &transposed) -> Abstract * {
    transposed = false;
    while (auto node = v.getDefiningOp<NodeOp>()) {
      if (!p.inside.contains(node) || node.getInputs().empty())
        break;
      StringRef op = node.getOpType();
      if (op == "Transpose")
        transposed = !transposed;
      else if (op != "Cast" && op != "Reshape" && op != "Unsqueeze" &&
               op != "Squeeze" && op != "Identity")
        return nullptr;
      v = node.getInputs()[0];
    }
    Abstract *a = lookup(v);
    return a && a->kind == Abstract::Param ? a : nullptr;
  };

  // Inputs from outside: the activation, parameters, the mask.
  struct Use {
    NodeOp node;
    unsigned operand;
    Abstract *param;
    bool transposed;
  };
  SmallVector<Use> paramUses;
  Value x;
  for (NodeOp node : block.nodes)
    for (auto [i, in] : llvm::enumerate(node.getInputs())) {
      bool transposed = false;
      if (Abstract *param = paramBehind(in, transposed)) {
        // Scalar initializers (dynamo's constants) are not parameters.
        if (numelOf(*this, param) > 1)
          paramUses.push_back(
              {node, static_cast<unsigned>(i), param, transposed});
        continue;
      }
      Operation *def = in.getDefiningOp();
      if (def && p.inside.contains(def))
        continue;
      Abstract *a = lookup(in);
      if (!a)
        continue;
      if (a->kind == Abstract::Act) {
        if (x && x != in)
          return blockError(*this, block) << "it reads two activations";
        x = in;
      }
      p.usesMask |= a->maskDerived;
    }
  p.x = x ? lookup(x) : nullptr;
  if (!p.x || p.x->act.layout != Layout::Packed)
    return blockError(*this, block)
           << "no [batch, seq, hidden] input activation";

  // Parameters by what consumes them.
  SmallVector<Use> matmuls;
  for (Use &u : paramUses) {
    StringRef op = u.node.getOpType();
    if (op == "MatMul" || op == "Gemm")
      matmuls.push_back(u);
    else if (op == "Conv")
      (u.operand == 1 ? p.convW : p.convB) = u.param;
    else if (op == "Exp")
      p.aLog = u.param;
    else if (op == "Add")
      p.dtBias = u.param;
  }
  // Multiplied parameters: the norm weight ([I]), D ([H], often viewed
  // [H, 1]) and, when the exporter folded -exp(A_log), A itself ([H], all
  // negative).
  SmallVector<Abstract *> muls;
  for (Use &u : paramUses)
    if (u.node.getOpType() == "Mul" && !llvm::is_contained(muls, u.param))
      muls.push_back(u.param);
  llvm::sort(muls, [&](Abstract *a, Abstract *b) {
    return numelOf(*this, a) < numelOf(*this, b);
  });
  if (!p.aLog && muls.size() == 3) {
    auto allNegative = [](Abstract *a) {
      return a->probe &&
             llvm::all_of(a->probe->data, [](double v) { return v < 0; });
    };
    unsigned a = allNegative(muls[0]) ? 0 : allNegative(muls[1]) ? 1 : 2;
    if (a < 2 && !allNegative(muls[1 - a])) {
      p.aLog = muls[a];
      p.foldedA = true;
      muls.erase(muls.begin() + a);
    }
  }
  if (muls.size() != 2)
    return blockError(*this, block) << "expected D and the norm weight, found "
                                    << muls.size() << " multiplied parameters";
  p.dParam = muls[0];
  p.normW = muls[1];
  if (matmuls.size() != 2)
    return blockError(*this, block) << "expected in_proj and out_proj, found "
                                    << matmuls.size() << " projections";
  p.inProj = matmuls[0].param, p.inT = matmuls[0].transposed;
  p.outProj = matmuls[1].param, p.outT = matmuls[1].transposed;
  if (!p.convW || !p.convB || !p.aLog || !p.dtBias)
    return blockError(*this, block) << "missing "
                                    << (!p.convW   ? "the conv1d weight"
                                        : !p.convB ? "the conv1d bias"
                                        : !p.aLog  ? "A_log"
                                                   : "dt_bias");
  return success();
}

LogicalResult Raiser::findMamba2Sizes(ScopeBlock &block, Mamba2Params &p) {
  p.heads = numelOf(*this, p.aLog);
  p.inner = numelOf(*this, p.normW);
  ArrayRef<int64_t> cw = shapeOf(*this, p.convW);
  if (cw.size() != 3 || cw[1] != 1 || p.heads <= 0 || p.inner % p.heads)
    return blockError(*this, block) << "unexpected conv1d weight or head sizes";
  p.conv = cw[0];
  p.kernel = cw[2];
  int64_t gn2 = p.conv - p.inner;
  if (gn2 <= 0 || gn2 % 2)
    return blockError(*this, block)
           << "conv1d channels " << p.conv << " do not fit " << p.inner
           << " inner features";
  int64_t gn = gn2 / 2;
  // n_groups and state_size: a reshape in the block ends with the constant
  // pair [n_groups, state_size] (B and C viewed per group). The heads'
  // view of x and y, [heads, head_dim], fits the same test when the inner
  // size equals n_groups * state_size: it counts only when no other pair
  // does (then n_groups = heads).
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  for (NodeOp node : block.nodes) {
    if (node.getOpType() != "Reshape" || node.getInputs().size() < 2)
      continue;
    auto concat = node.getInputs()[1].getDefiningOp<NodeOp>();
    if (!concat || concat.getOpType() != "Concat")
      continue;
    SmallVector<int64_t> tail;
    for (Value part : concat.getInputs()) {
      Abstract *a = lookup(part);
      std::optional<ProbeTensor> value;
      if (a && isConcrete(a))
        value = a->probe;
      else if (auto c = part.getDefiningOp<NodeOp>();
               c && c.getOpType() == "Constant")
        if (auto v = c.getOnnxAttrs().getAs<DenseElementsAttr>("value"))
          value = ProbeTensor::fromAttr(v);
      if (!value) {
        tail.clear();
        continue;
      }
      for (double d : value->data)
        tail.push_back(probeInt(d));
    }
    if (tail.size() >= 2) {
      int64_t g = tail[tail.size() - 2], n = tail.back();
      if (g > 0 && n > 0 && g * n == gn && p.heads % g == 0 &&
          !llvm::is_contained(pairs, std::pair(g, n)))
        pairs.emplace_back(g, n);
    }
  }
  std::pair<int64_t, int64_t> headsView(p.heads, p.inner / p.heads);
  if (pairs.size() > 1)
    llvm::erase(pairs, headsView);
  if (pairs.size() > 1)
    return blockError(*this, block)
           << "n_groups and state_size are ambiguous: reshapes to ["
           << pairs[0].first << ", " << pairs[0].second << "] and ["
           << pairs[1].first << ", " << pairs[1].second << "] both fit " << gn
           << " features";
  if (!pairs.empty())
    p.groups = pairs.front().first;
  if (!p.groups)
    return blockError(*this, block)
           << "cannot find n_groups and state_size (a reshape to "
              "[..., n_groups, state_size] with n_groups * state_size = "
           << gn << ")";
  p.state = gn / p.groups;
  p.hidden = featuresOf(p.x->act.value);
  return success();
}

LogicalResult Raiser::findMamba2Constants(ScopeBlock &block, Mamba2Params &p) {
  // The gated norm's epsilon and the dt clamp.
  std::optional<double> eps;
  for (NodeOp node : block.nodes) {
    StringRef scope = node.getScopeAttr() ? node.getScopeAttr().getValue() : "";
    if (node.getOpType() == "Add" && scope.ends_with(".norm") && !eps)
      eps = scalarIn(*this, node);
    if (node.getOpType() == "Clip" && node.getInputs().size() >= 2) {
      Value lo = node.getInputs()[1];
      if (Abstract *a = lookup(lo); a && isConcrete(a))
        p.dtMin = a->probe->scalar();
      else if (auto c = lo.getDefiningOp<NodeOp>())
        if (auto v = c.getOnnxAttrs().getAs<DenseElementsAttr>("value"))
          p.dtMin = ProbeTensor::fromAttr(v).scalar();
    }
  }
  if (!eps)
    return blockError(*this, block) << "cannot find the gated norm's epsilon";
  p.eps = *eps;

  // The one value that leaves the block is its output.
  for (NodeOp node : block.nodes)
    for (Value result : node.getResults())
      for (Operation *user : result.getUsers())
        if (!p.inside.contains(user) && !isConcrete(lookup(result))) {
          if (p.output && p.output != result)
            return blockError(*this, block)
                   << "two values leave the block (from "
                   << p.output.getDefiningOp<NodeOp>().getName() << " and "
                   << node.getName() << ")";
          p.output = result;
        }
  if (!p.output)
    return blockError(*this, block) << "no value leaves the block";
  return success();
}

LogicalResult Raiser::raiseMamba2(ScopeBlock &block) {
  Mamba2Params p;
  for (NodeOp node : block.nodes)
    p.inside.insert(node);
  if (failed(findMamba2Params(block, p)) || failed(findMamba2Sizes(block, p)) ||
      failed(findMamba2Constants(block, p)))
    return failure();

  NodeOp last = block.nodes.back();
  auto linearWeight = [&](Abstract *w, bool transposed, int64_t outF,
                          int64_t inF, StringRef name) -> FailureOr<Value> {
    ArrayRef<int64_t> st = shapeOf(*this, w);
    // MatMul reads [in, out]; an explicit Transpose means [out, in] stored.
    bool storedTransposed = !transposed;
    if (st.size() != 2 || (storedTransposed ? (st[0] != inF || st[1] != outF)
                                            : (st[0] != outF || st[1] != inF)))
      return blockError(*this, block)
             << name << " weight [" << st[0] << ", "
             << (st.size() > 1 ? st[1] : 0) << "] does not map " << inF
             << " to " << outF << " features";
    return useParam(last, *w, {outF, inF}, storedTransposed, "",
                    block.scope + "." + name.str() + ".weight");
  };
  // FQNs come from the mixer's scope: the nodes that read D, A_log or the
  // conv weight are the mixer's own, not a submodule's.
  auto named = [&](Abstract *w, ArrayRef<int64_t> shape,
                   StringRef fqnSuffix) -> FailureOr<Value> {
    return useParam(last, *w, shape, false, "",
                    block.scope + "." + fqnSuffix.str());
  };
  int64_t projOut = p.inner + p.conv + p.heads;
  FailureOr<Value> wIn =
      linearWeight(p.inProj, p.inT, projOut, p.hidden, "in_proj");
  FailureOr<Value> wOut =
      linearWeight(p.outProj, p.outT, p.hidden, p.inner, "out_proj");
  if (failed(wIn) || failed(wOut))
    return failure();
  FailureOr<Value> wConv =
      named(p.convW, {p.conv, 1, p.kernel}, "conv1d.weight");
  FailureOr<Value> bConv = named(p.convB, {p.conv}, "conv1d.bias");
  FailureOr<Value> dtB = named(p.dtBias, {p.heads}, "dt_bias");
  FailureOr<Value> aL = named(p.aLog, {p.heads}, "A_log");
  FailureOr<Value> dP = named(p.dParam, {p.heads}, "D");
  FailureOr<Value> nW = named(p.normW, {p.inner}, "norm.weight");
  if (failed(wConv) || failed(bConv) || failed(dtB) || failed(aL) ||
      failed(dP) || failed(nW))
    return failure();
  // An exporter that folded A = -exp(A_log) stored A: the parameter is
  // A_log again, read back as log(-A), so that training updates and saves
  // the checkpoint's tensor. A parameter without a source (bound by FQN)
  // keeps the folded form.
  bool foldedA = p.foldedA;
  if (foldedA && source.getArgAttrOfType<SourceAttr>(
                     p.aLog->argIndex, TPDialect::kSourceAttrName)) {
    params[p.aLog->argIndex].storedForm = StoredForm::NegExp;
    foldedA = false;
  }
  if (p.usesMask && !attentionMask)
    return blockError(*this, block) << "reads a padding mask but the graph "
                                       "has no attention_mask input";
  Value x = p.x->act.value;
  Value y = Mamba2MixerOp::create(
      builder, last.getLoc(), x.getType(), x, *wIn, *wConv, *bConv, *dtB, *aL,
      *dP, *nW, *wOut, p.usesMask ? attentionMask : Value(),
      builder.getI64IntegerAttr(p.heads),
      builder.getI64IntegerAttr(p.inner / p.heads),
      builder.getI64IntegerAttr(p.groups), builder.getI64IntegerAttr(p.state),
      builder.getI64IntegerAttr(p.kernel),
      builder.getF64FloatAttr(roundSignificant(p.eps)),
      builder.getF64FloatAttr(roundSignificant(p.dtMin)),
      foldedA ? builder.getUnitAttr() : UnitAttr());
  slot(p.output) = makeAct({y}, {probeBatch, probeSeq, p.hidden});
  return success();
}
