//===- Elementwise.cpp - activation functions, gating, residuals
//------------===//
//
// Exporters spell one activation function many ways (x * sigmoid(x), the
// tanh expansion of GELU, relu(x) * relu(x), a Gelu node): raising collects
// the elementwise expression of one activation and recognises the function
// by evaluating it. Products and sums of two activations are the gated MLP
// and the residual connections.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

double Raiser::evalExpr(int id, double x) const {
  const Expr &e = exprs[id];
  switch (e.op) {
  case Expr::X:
    return x;
  case Expr::Const:
    return e.value;
  case Expr::Unary: {
    double a = evalExpr(e.lhs, x);
    if (e.fn == "Tanh")
      return std::tanh(a);
    if (e.fn == "Sigmoid")
      return 1.0 / (1.0 + std::exp(-a));
    if (e.fn == "Erf")
      return std::erf(a);
    if (e.fn == "Relu")
      return std::max(a, 0.0);
    if (e.fn == "Neg")
      return -a;
    if (e.fn == "Exp")
      return std::exp(a);
    if (e.fn == "Abs")
      return std::fabs(a);
    if (e.fn == "Softplus")
      return std::log1p(std::exp(a));
    if (e.fn == "GeluTanh")
      return 0.5 * a *
             (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
    if (e.fn == "Gelu")
      return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
    return NAN;
  }
  case Expr::Binary: {
    double a = evalExpr(e.lhs, x), b = evalExpr(e.rhs, x);
    if (e.fn == "Add")
      return a + b;
    if (e.fn == "Sub")
      return a - b;
    if (e.fn == "Mul")
      return a * b;
    if (e.fn == "Div")
      return a / b;
    if (e.fn == "Pow")
      return std::pow(a, b);
    return NAN;
  }
  }
  return NAN;
}

int Raiser::exprOperand(Abstract *a, Value &source) {
  if (!a)
    return -1;
  // Scalars may be Constant nodes or (dynamo) scalar initializers.
  if (auto scalar = scalarOf(a))
    return addExpr({Expr::Const, "", *scalar});
  Value v;
  int id = -1;
  if (a->kind == Abstract::Act) {
    v = a->act.value;
    id = addExpr({Expr::X});
  } else if (a->kind == Abstract::Elementwise) {
    v = a->act.value;
    id = a->group;
  } else {
    return -1;
  }
  if (source && source != v)
    return -1;
  source = v;
  return id;
}

FailureOr<bool> Raiser::extendElementwise(NodeOp node, ArrayRef<Abstract *> in,
                                          Abstract &out) {
  static const llvm::StringSet<> unary = {"Tanh", "Sigmoid",  "Erf",
                                          "Relu", "Neg",      "Exp",
                                          "Abs",  "Softplus", "Gelu"};
  static const llvm::StringSet<> binary = {"Add", "Sub", "Mul", "Div", "Pow"};
  StringRef op = node.getOpType();
  Value source;
  Abstract *base = nullptr;
  for (Abstract *a : in)
    if (a && (a->kind == Abstract::Act || a->kind == Abstract::Elementwise)) {
      base = a;
      break;
    }
  if (!base)
    return false;
  int id;
  if (unary.contains(op) && in.size() == 1) {
    int operand = exprOperand(in[0], source);
    if (operand < 0)
      return false;
    std::string fn = op.str();
    if (op == "Gelu") {
      auto approx = node.getOnnxAttrs().getAs<StringAttr>("approximate");
      fn = approx && approx.getValue() == "tanh" ? "GeluTanh" : "Gelu";
    }
    id = addExpr({Expr::Unary, fn, 0.0, operand});
  } else if (binary.contains(op) && in.size() == 2) {
    size_t mark = exprs.size();
    int lhs = exprOperand(in[0], source);
    int rhs = lhs < 0 ? -1 : exprOperand(in[1], source);
    if (lhs < 0 || rhs < 0) {
      exprs.resize(mark);
      return false;
    }
    id = addExpr({Expr::Binary, op.str(), 0.0, lhs, rhs});
  } else {
    return false;
  }
  out = *base;
  out.kind = Abstract::Elementwise;
  out.group = id;
  // A value with several users is an activation in its own right (the
  // scaled Gemma embedding feeds both a norm and the residual) when it is a
  // known function; otherwise (relu(x) in relu(x) * relu(x)) its users
  // extend it further.
  if (!node.getResult(0).hasOneUse() && recognizeFunction(out.group))
    return succeeded(materialize(node, out));
  return true;
}

std::optional<std::pair<StringRef, double>> Raiser::recognizeFunction(int id) {
  // A bf16 / f16 checkpoint's export holds its constants in that type
  // (GELU's 0.044715 becomes 0.04467...): such a function is matched within
  // that type's rounding, the closest known one winning.
  SmallVector<double> constants; // the non-integer ones
  for (SmallVector<int> stack{id}; !stack.empty();) {
    const Expr &e = exprs[stack.pop_back_val()];
    if (e.op == Expr::Const && e.value != std::trunc(e.value))
      constants.push_back(e.value);
    if (e.lhs >= 0)
      stack.push_back(e.lhs);
    if (e.rhs >= 0)
      stack.push_back(e.rhs);
  }
  bool roundedConstants =
      !constants.empty() &&
      (allRepresentableIn(constants, llvm::APFloat::BFloat()) ||
       allRepresentableIn(constants, llvm::APFloat::IEEEhalf()));
  const double tolerance = roundedConstants ? 1e-2 : 1e-5;
  // The largest relative error of f against the expression on [-6, 6].
  auto worstError = [&](llvm::function_ref<double(double)> f) {
    double worst = 0;
    for (int i = 0; i <= 96; ++i) {
      double x = -6.0 + i * 0.125;
      double got = evalExpr(id, x), want = f(x);
      double err = std::fabs(got - want) / std::max(1.0, std::fabs(want));
      if (!(err <= worst))
        worst = std::isnan(err) ? INFINITY : err;
    }
    return worst;
  };
  auto matches = [&](llvm::function_ref<double(double)> f) {
    return worstError(f) <= 1e-5;
  };
  // f = c * g for a known activation g (c = 1 mostly; exporters may fold a
  // following constant factor into the chain).
  using Fn = double (*)(double);
  static const std::pair<const char *, Fn> known[] = {
      {"identity", [](double x) { return x; }},
      {"silu", [](double x) { return x / (1.0 + std::exp(-x)); }},
      {"gelu_tanh",
       [](double x) {
         return 0.5 * x *
                (1 +
                 std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       }},
      {"gelu",
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"relu_squared", [](double x) { return x > 0 ? x * x : 0.0; }},
  };
  std::optional<std::pair<StringRef, double>> best;
  double bestError = INFINITY;
  for (const auto &entry : known) {
    // Named, not structured bindings: the lambda below captures them.
    const char *name = entry.first;
    Fn g = entry.second;
    double factor = evalExpr(id, 1.5) / g(1.5);
    if (!std::isfinite(factor) || factor == 0.0)
      continue;
    double err = worstError([&](double x) { return factor * g(x); });
    if (err <= tolerance && err < bestError) {
      bestError = err;
      best = std::make_pair(StringRef(name), roundSignificant(factor));
    }
  }
  if (best)
    return best;
  // cap * tanh(x / cap), Gemma's logit soft-capping: the cap is where the
  // function saturates; the result is the cap, not a factor.
  double cap = evalExpr(id, 1e9);
  if (std::isfinite(cap) && cap > 0 &&
      std::fabs(evalExpr(id, -1e9) + cap) <= 1e-6 * cap) {
    auto softcap = [cap](double x) { return cap * std::tanh(x / cap); };
    bool wide = true;
    for (double x : {-4 * cap, -cap, -cap / 3, cap / 3, cap, 4 * cap})
      wide &= std::fabs(evalExpr(id, x) - softcap(x)) <= 1e-5 * cap;
    if (wide && matches(softcap))
      return std::make_pair(StringRef("softcap"), roundSignificant(cap));
  }
  return std::nullopt;
}

LogicalResult Raiser::materialize(NodeOp node, Abstract &a) {
  if (a.kind != Abstract::Elementwise)
    return success();
  int id = a.group;
  Activation result = a.act;
  Location loc = node.getLoc();
  Value x = a.act.value;
  std::optional<std::pair<StringRef, double>> known = recognizeFunction(id);
  if (!known)
    return nodeError(node) << "the elementwise function computed before this "
                              "node (f(1) = "
                           << evalExpr(id, 1.0)
                           << ", f(-1) = " << evalExpr(id, -1.0)
                           << ") is not SiLU, GELU, squared ReLU, "
                              "soft-capping or a scale";
  auto [match, c] = *known;
  Value y = x;
  if (match == "silu")
    y = SiluOp::create(builder, loc, x);
  else if (match == "gelu_tanh" || match == "gelu")
    y = GeluOp::create(builder, loc, x,
                       GeluApproximationAttr::get(
                           ctx, match == "gelu" ? GeluApproximation::None
                                                : GeluApproximation::Tanh));
  else if (match == "relu_squared")
    y = ReluSquaredOp::create(builder, loc, x);
  else if (match == "softcap")
    y = SoftcapOp::create(builder, loc, x, builder.getF64FloatAttr(c));
  if (c != 1.0 && match != "softcap")
    y = ScaleOp::create(builder, loc, y, builder.getF64FloatAttr(c));
  result.value = y;
  a.kind = Abstract::Act;
  a.act = result;
  a.group = 0;
  return success();
}

namespace {

/// Two activations of one layout: the residual sum.
FailureOr<bool> residual(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                         Abstract &out) {
  if (!isAct(in, 0) || !isAct(in, 1))
    return false;
  const Activation &a = in[0]->act, &b = in[1]->act;
  if (a.layout != b.layout || a.headDim != b.headDim ||
      a.value.getType() != b.value.getType())
    return r.nodeError(node) << "adds activations of different layouts";
  Activation result = a;
  result.value = AddOp::create(r.builder, node.getLoc(), a.value, b.value);
  out = r.makeAct(result, in[0]->shape);
  return true;
}

/// Two activations of one layout: the gate of a gated MLP.
FailureOr<bool> gate(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                     Abstract &out) {
  if (!isAct(in, 0) || !isAct(in, 1))
    return false;
  const Activation &a = in[0]->act, &b = in[1]->act;
  if (a.layout != b.layout || a.value.getType() != b.value.getType())
    return r.nodeError(node) << "multiplies activations of different layouts";
  Activation result = a;
  result.value = MulOp::create(r.builder, node.getLoc(), a.value, b.value);
  out = r.makeAct(result, in[0]->shape);
  return true;
}

} // namespace

void mlir::tp::raise::registerElementwiseRecognizers(RecognizerTable &table) {
  table.add("Add", "residual", Stage::OnActivations, residual);
  table.add("Mul", "gate", Stage::OnActivations, gate);
}
