//===- Rotary.cpp - rotary position embedding
//-------------------------------===//
//
// HF's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, where
// rotate_half concatenates the negated second half of each head with its
// first half. The cos and sin tables are probe values; theta is fitted from
// them and checked at every probed position.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

#include "tprt/Rope.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

/// Index of the table element broadcast to logical position (b, p, i) of an
/// activation in `layout` (head index 0).
static std::optional<double> tableAt(const ProbeTensor &table, Layout layout,
                                     int64_t b, int64_t p, int64_t i) {
  SmallVector<int64_t> idx;
  if (layout == Layout::Heads)
    idx = {b, p, 0, i};
  else
    idx = {b, 0, p, i};
  // A table shorter than the probe reads is nullopt, not a read past its
  // end.
  return table.at(idx);
}

LogicalResult Raiser::emitRotary(NodeOp node, Abstract &cosPart,
                                 Abstract &sinPart, Abstract &out) {
  const Activation &x = cosPart.act;
  if (x.value != sinPart.act.value || x.layout != sinPart.act.layout)
    return nodeError(node) << "the cos and sin halves of a rotary embedding "
                              "apply to different tensors";
  if (x.layout != Layout::Heads && x.layout != Layout::HeadsT)
    return nodeError(node) << "rotary embedding of an activation that is not "
                              "split into heads";
  int64_t d = x.headDim;
  const ProbeTensor &cosT = *cosPart.table, &sinT = *sinPart.table;
  if (cosT.shape.empty() || cosT.shape.back() != d || sinT.shape.empty() ||
      sinT.shape.back() != d)
    return nodeError(node) << "the rotary tables are not [.., seq, head_dim]";
  // Both halves of each head's table are checked (HF's cat(freqs, freqs)).
  FailureOr<RopeFit> fit = fitRotaryTables(
      node, d, d,
      [&](int64_t b, int64_t p, int64_t i) {
        return tableAt(cosT, x.layout, b, p, i);
      },
      [&](int64_t b, int64_t p, int64_t i) {
        return tableAt(sinT, x.layout, b, p, i);
      },
      {&cosT, &sinT});
  if (failed(fit))
    return failure();
  Value y = createRotary(node.getLoc(), x.value, d, d, false, *fit);
  Activation result = x;
  result.value = y;
  out = makeAct(result, cosPart.shape);
  return success();
}

namespace {

/// The first table entry that differs from RoPE's.
struct Mismatch {
  int64_t b, p, i;
  double c, s;
};

/// How closely the tables must match, and whether they hold a bf16 or f16
/// checkpoint's rounding (then they are compared within it, and theta is
/// also read where the angle is large and rounded to the values
/// checkpoints use).
std::pair<double, bool> tableTolerance(ArrayRef<const ProbeTensor *> data) {
  auto allRepresentable = [&](const llvm::fltSemantics &sem) {
    return llvm::all_of(data, [&](const ProbeTensor *t) {
      return allRepresentableIn(t->data, sem);
    });
  };
  if (allRepresentable(llvm::APFloat::BFloat()))
    return {8e-3, true};
  if (allRepresentable(llvm::APFloat::IEEEhalf()))
    return {1e-3, true};
  return {1e-4, false};
}

/// What the candidates of a fit are read from: the tables, the angles of
/// features 0, 1 and the last pair at position 1, and the configuration.
struct RotaryEvidence {
  int64_t rot, probeSeq;
  Raiser::TableEntry cosAt, sinAt;
  double f0, f1, fLow;
  bool lowPrecision;
  double configTheta;
  std::optional<tprt::RopeScaling> configRope;

  /// The angle of feature i at position 1 is its frequency.
  std::optional<double> frequencyAt(int64_t i) const {
    std::optional<double> s1 = sinAt(0, 1, i), c1 = cosAt(0, 1, i);
    if (!s1 || !c1)
      return std::nullopt;
    return std::atan2(*s1, *c1);
  }
};

/// The rope types transformers' Llama-family checkpoints use, each with its
/// parameters read off the tables: unscaled (theta from the lowest
/// frequency); linear (f0 = 1 / factor); llama3 (Llama 3.x's parameters:
/// the highest frequencies kept, theta from f1, the lowest divided by
/// factor; then any other configuration, RopeFit.h). Failure when the
/// tables are shorter than the probe reads.
FailureOr<SmallVector<RopeFit>> ropeCandidates(const RotaryEvidence &e) {
  int64_t half = e.rot / 2, rot = e.rot;
  SmallVector<RopeFit> candidates;
  // One frequency pair carries no theta (its frequency is 1 whatever it is).
  candidates.push_back(
      {half >= 2 ? ropeThetaFromAngle(e.fLow, half - 1, rot) : 10000.0, {}});
  if (half >= 2 && std::fabs(e.f0 - 1.0) > 1e-6 && e.f0 > 0) {
    double factor = roundSignificant(1.0 / e.f0);
    tprt::RopeScaling linear;
    linear.type = tprt::RopeType::Linear;
    linear.factor = factor;
    candidates.push_back(
        {ropeThetaFromAngle(e.fLow * factor, half - 1, rot), linear});
  }
  if (half >= 2) {
    double theta = ropeThetaFromAngle(e.f1, 1, rot);
    double unscaledLow = std::pow(theta, -2.0 * (half - 1) / rot);
    tprt::RopeScaling llama3;
    llama3.type = tprt::RopeType::Llama3;
    llama3.factor = roundSignificant(unscaledLow / e.fLow);
    if (llama3.factor > 1.0 + 1e-6)
      candidates.push_back({theta, llama3});
    SmallVector<double> frequencies;
    for (int64_t i = 0; i < half; ++i) {
      std::optional<double> f = e.frequencyAt(i);
      if (!f)
        return failure();
      frequencies.push_back(*f);
    }
    for (const RopeFit &fit : fitLlama3Scaling(frequencies, rot, e.configTheta,
                                               e.lowPrecision ? 1e-2 : 1e-5))
      candidates.push_back(fit);
  }
  if (e.lowPrecision && half >= 2) {
    // f1 from the largest position whose angle stays below 3 (no wrap),
    // theta rounded to 1, 2 and 3 significant digits; and the config's.
    int64_t p =
        std::min<int64_t>(e.probeSeq - 1, std::max<int64_t>(1, 3.0 / e.f1));
    std::optional<double> sp = e.sinAt(0, p, 1), cp = e.cosAt(0, p, 1);
    if (sp && cp) {
      double theta = std::pow(std::atan2(*sp, *cp) / p, -rot / 2.0);
      for (int digits = 1; digits <= 3; ++digits) {
        double scale =
            std::pow(10.0, std::floor(std::log10(theta)) - (digits - 1));
        candidates.push_back({std::round(theta / scale) * scale, {}});
      }
    }
    if (e.configTheta > 0)
      candidates.push_back({e.configTheta, {}});
  }
  // YaRN's ramp and LongRoPE's factors are parameters the tables cannot
  // tell apart, dynamic NTK's tables are unscaled at the traced length, and
  // Llama 3's parameters are known exactly: taken from --hf-config, before
  // every fit (unscaled RoPE matches dynamic's tables too).
  if (e.configRope && e.configTheta > 0)
    candidates.insert(candidates.begin(), {e.configTheta, *e.configRope});
  return candidates;
}

} // namespace

FailureOr<RopeFit> Raiser::fitRotaryTables(NodeOp node, int64_t rot,
                                           int64_t width, TableEntry cosAt,
                                           TableEntry sinAt,
                                           ArrayRef<const ProbeTensor *> data) {
  int64_t half = rot / 2;
  auto shortTables = [&]() {
    return nodeError(node) << "the rotary tables are shorter than the probe "
                              "reads (batch "
                           << probeBatch << ", " << probeSeq << " positions)";
  };
  auto [tolerance, lowPrecision] = tableTolerance(data);
  RotaryEvidence evidence{rot, probeSeq, cosAt,        sinAt,       0,
                          0,   0,        lowPrecision, configTheta, configRope};
  std::optional<double> f0 = evidence.frequencyAt(0),
                        f1 = evidence.frequencyAt(1),
                        fLow = evidence.frequencyAt(half - 1);
  if (!f0 || !f1 || !fLow)
    return shortTables();
  if (half >= 2 && (!(*f1 > 0) || !(*fLow > 0)))
    return nodeError(node) << "cannot read a rotary frequency from the "
                              "cos/sin tables";
  evidence.f0 = *f0;
  evidence.f1 = *f1;
  evidence.fLow = *fLow;
  FailureOr<SmallVector<RopeFit>> candidates = ropeCandidates(evidence);
  if (failed(candidates))
    return shortTables();

  // Every table entry against RoPE with `theta` and `scaling`; the first
  // mismatch, if any.
  auto check = [&](double theta, const tprt::RopeScaling &scaling)
      -> FailureOr<std::optional<Mismatch>> {
    SmallVector<float> freq(half);
    // LongRoPE's export picks its factors by the traced length (a Where
    // on it): the probe's. Dynamic NTK's holds unscaled tables.
    tprt::ropeInverseFrequencies(
        freq.data(), rot, theta, scaling,
        scaling.type == tprt::RopeType::Longrope ? probeSeq : 0);
    float amplitude = static_cast<float>(scaling.attentionFactor);
    for (int64_t b = 0; b < probeBatch; ++b)
      for (int64_t p = 0; p < probeSeq; ++p)
        for (int64_t i = 0; i < width; ++i) {
          float angle = static_cast<float>(p) * freq[i % half];
          std::optional<double> cv = cosAt(b, p, i), sv = sinAt(b, p, i);
          if (!cv || !sv)
            return failure();
          if (std::fabs(*cv - std::cos(angle) * amplitude) > tolerance ||
              std::fabs(*sv - std::sin(angle) * amplitude) > tolerance)
            return std::optional<Mismatch>(Mismatch{b, p, i, *cv, *sv});
        }
    return std::optional<Mismatch>();
  };
  std::optional<Mismatch> firstMismatch;
  for (const RopeFit &c : *candidates) {
    FailureOr<std::optional<Mismatch>> m = check(c.theta, c.scaling);
    if (failed(m))
      return shortTables();
    if (!*m)
      return c;
    if (!firstMismatch)
      firstMismatch = *m;
  }
  const Mismatch &m = *firstMismatch;
  return nodeError(node) << "the rotary tables do not match RoPE with theta "
                         << candidates->front().theta
                         << " at positions 0..seq-1 (batch " << m.b
                         << ", position " << m.p << ", feature " << m.i
                         << ": cos " << m.c << ", sin " << m.s
                         << "), nor linear or llama3 scaling with parameters "
                            "read from the tables"
                         << (configRope
                                 ? ", nor the config's scaling"
                                 : " (yarn, dynamic and longrope need "
                                   "--hf-config; other rope types are not "
                                   "supported yet)");
}

Value Raiser::createRotary(Location loc, Value x, int64_t headDim,
                           int64_t rotaryDim, bool interleaved,
                           const RopeFit &fit) {
  StringAttr ropeType;
  FloatAttr factor, lowFreqFactor, highFreqFactor, betaFast, betaSlow,
      attentionFactor;
  DenseF64ArrayAttr shortFactor, longFactor;
  IntegerAttr originalMax;
  BoolAttr truncate;
  const tprt::RopeScaling &scaling = fit.scaling;
  if (scaling.type != tprt::RopeType::Default) {
    bool llama3 = scaling.type == tprt::RopeType::Llama3;
    bool yarn = scaling.type == tprt::RopeType::Yarn;
    bool dynamic = scaling.type == tprt::RopeType::Dynamic;
    bool longrope = scaling.type == tprt::RopeType::Longrope;
    ropeType = builder.getStringAttr(llama3     ? "llama3"
                                     : yarn     ? "yarn"
                                     : dynamic  ? "dynamic"
                                     : longrope ? "longrope"
                                                : "linear");
    if (!longrope)
      factor = builder.getF64FloatAttr(scaling.factor);
    if (longrope) {
      shortFactor = builder.getDenseF64ArrayAttr(scaling.shortFactor);
      longFactor = builder.getDenseF64ArrayAttr(scaling.longFactor);
      attentionFactor = builder.getF64FloatAttr(scaling.attentionFactor);
    }
    if (llama3 || yarn || dynamic || longrope)
      originalMax = builder.getI64IntegerAttr(scaling.originalMaxPositions);
    if (llama3) {
      lowFreqFactor = builder.getF64FloatAttr(scaling.lowFreqFactor);
      highFreqFactor = builder.getF64FloatAttr(scaling.highFreqFactor);
    }
    if (yarn) {
      betaFast = builder.getF64FloatAttr(scaling.betaFast);
      betaSlow = builder.getF64FloatAttr(scaling.betaSlow);
      attentionFactor = builder.getF64FloatAttr(scaling.attentionFactor);
      if (!scaling.truncate)
        truncate = builder.getBoolAttr(false);
    }
  }
  return RotaryOp::create(
      builder, loc, x.getType(), x, builder.getI64IntegerAttr(headDim),
      builder.getF64FloatAttr(fit.theta),
      rotaryDim != headDim ? builder.getI64IntegerAttr(rotaryDim)
                           : IntegerAttr(),
      interleaved ? builder.getUnitAttr() : UnitAttr(), ropeType, factor,
      lowFreqFactor, highFreqFactor, originalMax, betaFast, betaSlow, truncate,
      attentionFactor, UnitAttr(), shortFactor, longFactor);
}

namespace {

/// x * cos (head-split x times a table), rotate_half(x) * sin.
FailureOr<bool> tableProduct(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                             Abstract &out) {
  if (in.size() != 2)
    return false;
  for (unsigned i = 0; i < 2; ++i) {
    Abstract *a = in[i], *b = in[1 - i];
    if (a->kind == Abstract::Act && a->act.layout != Layout::Packed &&
        Raiser::isConcrete(b) && b->kind == Abstract::Concrete) {
      out = r.derived(Abstract::TableProduct, *a);
      out.table = std::make_shared<ProbeTensor>(*b->probe);
      return true;
    }
    if (a->kind == Abstract::RopeRotated && Raiser::isConcrete(b)) {
      out = r.derived(Abstract::RotatedProduct, *a);
      out.table = std::make_shared<ProbeTensor>(*b->probe);
      return true;
    }
  }
  return false;
}

/// x * cos + rotate_half(x) * sin completes the block.
FailureOr<bool> rotary(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                       Abstract &out) {
  if (in.size() != 2)
    return false;
  for (unsigned i = 0; i < 2; ++i)
    if (in[i]->kind == Abstract::TableProduct &&
        in[1 - i]->kind == Abstract::RotatedProduct)
      return matched(r.emitRotary(node, *in[i], *in[1 - i], out));
  return false;
}

/// The first or second half of each head.
FailureOr<bool> half(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                     Abstract &out) {
  if (!isAct(in, 0) || (in[0]->act.layout != Layout::Heads &&
                        in[0]->act.layout != Layout::HeadsT))
    return false;
  auto starts = concreteInts(in, 1), ends = concreteInts(in, 2),
       axes = concreteInts(in, 3);
  int64_t d = in[0]->act.headDim;
  bool lastAxis =
      !axes || (axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == 3));
  if (!starts || !ends || starts->size() != 1 || !lastAxis)
    return false;
  int64_t s = (*starts)[0], e = std::min((*ends)[0], d);
  if ((s != 0 || e != d / 2) && (s != d / 2 || e != d))
    return false;
  out = r.derived(Abstract::RopeHalf, *in[0]);
  out.group = s == 0 ? 1 : 2;
  return true;
}

FailureOr<bool> negatedHalf(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                            Abstract &out) {
  if (!isKind(in, 0, Abstract::RopeHalf) || in[0]->group != 2)
    return false;
  out = r.derived(Abstract::RopeNegHalf, *in[0]);
  return true;
}

/// [-second half, first half]: rotate_half(x).
FailureOr<bool> rotatedHalves(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                              Abstract &out) {
  if (in.size() != 2 || !isKind(in, 0, Abstract::RopeNegHalf) ||
      !isKind(in, 1, Abstract::RopeHalf) || in[1]->group != 1 ||
      in[0]->act.value != in[1]->act.value)
    return false;
  out = r.derived(Abstract::RopeRotated, *in[1]);
  return true;
}

} // namespace

void mlir::tp::raise::registerRotaryRecognizers(RecognizerTable &table) {
  table.add("Mul", "rotary-table-product", Stage::OnActivations, tableProduct);
  table.add("Add", "rotary", Stage::OnActivations, rotary);
  table.add("Slice", "rotary-half", Stage::OnActivations, half);
  table.add("Neg", "rotary-negated-half", Stage::OnActivations, negatedHalf);
  table.add("Concat", "rotary-rotate-half", Stage::OnActivations,
            rotatedHalves);
}
