//===- RopeFit.cpp - RoPE scaling parameters from frequencies -------------===//
//
// Llama 3's scaling, for unscaled frequency f (transformers'
// _compute_llama3_parameters): kept when f > B, divided by `factor` when
// f < A, and between them f * ((1 - s) / factor + s) with s = (f - A) /
// (B - A), where A = 2 pi low / original and B = 2 pi high / original.
// The ratio r = scaled / unscaled is 1 on the kept band, 1 / factor on the
// scaled band and affine in f on the blend. The fit proposes theta values
// (from spans of frequencies inside one band, whose ratios are powers of
// theta, and from triples: any three consecutive frequencies of one band
// satisfy a linear recurrence whose characteristic polynomial has theta's
// q = theta^(-2 / rot) as a root), classifies the ratios at each theta
// and solves for factor, A and B.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Probe/RopeFit.h"

#include <algorithm>
#include <cmath>

using namespace mlir::tp;

namespace {

constexpr double kTwoPi = 2 * M_PI;

double roundDigits(double v, int digits) {
  if (v == 0 || !std::isfinite(v))
    return v;
  // Divide or multiply by an exact power of ten: 1e6 stays 1e6.
  double exponent = std::floor(std::log10(std::fabs(v))) - (digits - 1);
  double power = std::pow(10.0, std::fabs(exponent));
  return exponent >= 0 ? std::round(v / power) * power
                       : std::round(v * power) / power;
}

/// The roundest number in [lo, hi] (fewest significant digits, at most 6)
/// and its digit count; 0 digits when the range is empty.
std::pair<double, int> roundestIn(double lo, double hi) {
  if (!(lo > 0) || !(hi >= lo))
    return {0, 0};
  double mid = 0.5 * (lo + hi);
  for (int digits = 1; digits <= 6; ++digits) {
    // The candidates at this precision around the midpoint.
    double step = std::pow(10.0, std::floor(std::log10(mid)) - (digits - 1));
    double base = std::round(mid / step) * step;
    for (double v : {base, base - step, base + step})
      if (v > 0 && v >= lo && v <= hi)
        return {v, digits};
  }
  return {roundDigits(mid, 6), 7};
}

/// The unscaled frequencies as the runtime computes them.
llvm::SmallVector<double> unscaledFrequencies(double theta, int64_t rot) {
  llvm::SmallVector<float> f(rot / 2);
  tprt::ropeInverseFrequencies(f.data(), rot, theta, tprt::RopeScaling());
  return llvm::SmallVector<double>(f.begin(), f.end());
}

bool reproduces(llvm::ArrayRef<double> freq, int64_t rot, const RopeFit &fit,
                double relTolerance) {
  llvm::SmallVector<float> f(rot / 2);
  tprt::ropeInverseFrequencies(f.data(), rot, fit.theta, fit.scaling);
  for (size_t i = 0; i < freq.size(); ++i)
    if (!(std::fabs(f[i] - freq[i]) <= relTolerance * std::fabs(freq[i])))
      return false;
  return true;
}

/// Roots in (0, 1) of a q^3 + b q^2 + c q + d: sign changes on a grid,
/// refined by bisection.
llvm::SmallVector<double> rootsInUnitInterval(double a, double b, double c,
                                              double d) {
  auto p = [&](double q) { return ((a * q + b) * q + c) * q + d; };
  llvm::SmallVector<double> roots;
  constexpr int kSteps = 4096;
  double prevQ = 1e-9, prev = p(prevQ);
  for (int k = 1; k <= kSteps; ++k) {
    double q = static_cast<double>(k) / kSteps * (1 - 1e-9), v = p(q);
    if ((prev < 0) != (v < 0)) {
      double lo = prevQ, hi = q;
      for (int it = 0; it < 200 && hi - lo > 1e-16; ++it) {
        double mid = 0.5 * (lo + hi);
        if ((p(mid) < 0) == (prev < 0))
          lo = mid;
        else
          hi = mid;
      }
      roots.push_back(0.5 * (lo + hi));
    }
    prevQ = q;
    prev = v;
  }
  return roots;
}

/// The band thresholds' admissible ranges at one theta and factor.
struct Thresholds {
  double aLo, aHi; // A = 2 pi low / original
  double bLo, bHi; // B = 2 pi high / original
  /// A and B tied by one blended frequency f with ratio s: f = A + s (B - A).
  std::optional<std::pair<double, double>> tied;
};

/// How round `v` is: 0 for the factors configurations use, else the
/// significant digits it needs (7: none of at most 6 suffice).
int roundness(double v) {
  for (double common : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 0.5})
    if (std::fabs(v - common) <= 1e-9 * common)
      return 0;
  for (int digits = 1; digits <= 6; ++digits)
    if (std::fabs(roundDigits(v, digits) - v) <= 1e-9 * std::fabs(v))
      return digits;
  return 7;
}

/// `v` as the roundest value within `relTol` of it (fewest significant
/// digits), or rounded to 6 digits: values the tables give only to f32
/// precision.
double snapToRound(double v, double relTol) {
  for (int digits = 1; digits <= 6; ++digits)
    if (std::fabs(roundDigits(v, digits) - v) <= relTol * std::fabs(v))
      return roundDigits(v, digits);
  return roundDigits(v, 6);
}

/// Round values in [lo, hi]: the common factors there, and the roundest.
llvm::SmallVector<double> roundValuesIn(double lo, double hi) {
  llvm::SmallVector<double> out;
  for (double common : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 0.5})
    if (common >= lo && common <= hi)
      out.push_back(common);
  auto [v, digits] = roundestIn(lo, hi);
  if (digits)
    out.push_back(v);
  return out;
}

/// Representations of thresholds as (original, low, high), roundest first.
void addRepresentations(double theta, double factor, const Thresholds &t,
                        llvm::SmallVectorImpl<RopeFit> &out) {
  static constexpr int64_t kOriginals[] = {
      8192,   4096,   2048, 1024, 512,  256,   128,   64,
      32,     16,     8,    4,    2,    16384, 32768, 65536,
      131072, 262144, 1000, 2000, 4000, 8000,  500,   100};
  struct Scored {
    int score;
    RopeFit fit;
  };
  llvm::SmallVector<Scored> scored;
  for (int64_t original : kOriginals) {
    double scale = static_cast<double>(original) / kTwoPi;
    tprt::RopeScaling s;
    s.type = tprt::RopeType::Llama3;
    s.factor = factor;
    s.originalMaxPositions = original;
    for (double low : roundValuesIn(t.aLo * scale, t.aHi * scale)) {
      llvm::SmallVector<double> highs;
      if (t.tied) {
        // One equation for two unknowns: high follows from low.
        auto [f, ratio] = *t.tied;
        double a = low / scale, b = a + (f - a) / ratio;
        if (!(b >= t.bLo && b <= t.bHi))
          continue;
        highs.push_back(snapToRound(b * scale, 1e-6));
      } else {
        // Both thresholds may lie in one gap between frequencies: high
        // above low.
        highs = roundValuesIn(
            std::max(t.bLo * scale, std::nextafter(low, 1e300)), t.bHi * scale);
      }
      for (double high : highs) {
        if (!(low < high))
          continue;
        s.lowFreqFactor = low;
        s.highFreqFactor = high;
        scored.push_back({roundness(low) + roundness(high), {theta, s}});
      }
    }
  }
  std::stable_sort(
      scored.begin(), scored.end(),
      [](const Scored &a, const Scored &b) { return a.score < b.score; });
  // A few: the caller checks each against the tables.
  for (size_t i = 0; i < scored.size() && i < 4; ++i)
    out.push_back(scored[i].fit);
}

/// The llama3 fits at one theta, from the ratios' bands. With no frequency
/// in the scaled band, factor is any value that puts A below the lowest
/// frequency: round ones are proposed.
void fitAtTheta(llvm::ArrayRef<double> freq, int64_t rot, double theta,
                llvm::SmallVectorImpl<RopeFit> &out) {
  int64_t half = rot / 2;
  llvm::SmallVector<double> f = unscaledFrequencies(theta, rot);
  llvm::SmallVector<double> r(half);
  for (int64_t i = 0; i < half; ++i) {
    if (!(f[i] > 0) || !(freq[i] > 0))
      return;
    r[i] = freq[i] / f[i];
    if (r[i] > 1 + 1e-4)
      return;
  }
  double rmin = *std::min_element(r.begin(), r.end());
  if (rmin > 1 - 1e-5)
    return;
  constexpr double kEps = 2e-5;
  // Kept band: a prefix with ratio 1.
  int64_t kept = 0;
  while (kept < half && r[kept] >= 1 - kEps)
    ++kept;
  // Scaled band: a suffix with the smallest ratio.
  int64_t scaledFrom = half;
  while (scaledFrom > kept && r[scaledFrom - 1] <= rmin * (1 + kEps))
    --scaledFrom;
  // With one frequency at the smallest ratio it may be blended instead.
  for (bool lastIsBlend : {false, true}) {
    int64_t from = scaledFrom;
    if (lastIsBlend) {
      if (half - scaledFrom != 1)
        break;
      from = half;
    }
    llvm::SmallVector<double> factors;
    if (from < half) {
      double sum = 0;
      for (int64_t i = from; i < half; ++i)
        sum += r[i];
      factors.push_back(
          snapToRound(static_cast<double>(half - from) / sum, 1e-6));
    } else {
      // Any factor >= 1 / r of the lowest blended frequency; round ones.
      double least = 1 / r[half - 1];
      factors.push_back(std::ceil(least - 1e-9));
      for (double v : {2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0})
        if (v > least && v != factors.front())
          factors.push_back(v);
    }
    for (double factor : factors) {
      double inv = 1 / factor;
      if (!(factor > 1))
        continue;
      // Blend ratios s = (f - A) / (B - A).
      llvm::SmallVector<std::pair<double, double>> blend;
      for (int64_t i = kept; i < from; ++i)
        blend.push_back({f[i], (r[i] - inv) / (1 - inv)});
      Thresholds t;
      double upper = kept > 0 ? f[kept - 1] : 1e30;
      double lower = from < half ? f[from] : 0;
      if (blend.size() >= 2) {
        // Least squares of s = u f + v.
        double n = blend.size(), sf = 0, ss = 0, sff = 0, sfs = 0;
        for (auto [x, y] : blend) {
          sf += x;
          ss += y;
          sff += x * x;
          sfs += x * y;
        }
        double u = (n * sfs - sf * ss) / (n * sff - sf * sf);
        double v = (ss - u * sf) / n;
        if (!(u > 0))
          continue;
        double a = -v / u, b = a + 1 / u;
        if (!(a > 0))
          continue;
        t = {a * (1 - 1e-5), a * (1 + 1e-5), b * (1 - 1e-5), b * (1 + 1e-5),
             std::nullopt};
      } else if (blend.size() == 1) {
        auto [x, s] = blend.front();
        if (!(s > 0 && s < 1))
          continue;
        double aLo =
            std::max(lower, (x - s * std::min(upper, 1e300)) / (1 - s));
        t = {std::max(aLo, 1e-300), x, x, upper, std::make_pair(x, s)};
      } else {
        if (kept == 0 || from == half)
          continue;
        t = {lower, upper, lower, upper, std::nullopt};
      }
      addRepresentations(theta, factor, t, out);
    }
  }
}

} // namespace

llvm::SmallVector<RopeFit>
mlir::tp::fitLlama3Scaling(llvm::ArrayRef<double> freq, int64_t rot,
                           double theta, double relTolerance) {
  int64_t half = rot / 2;
  llvm::SmallVector<RopeFit> fits;
  if (half < 2 || static_cast<int64_t>(freq.size()) != half)
    return fits;
  auto qToTheta = [&](double q) { return std::pow(q, -rot / 2.0); };
  // Raw theta estimates; each also tried rounded.
  llvm::SmallVector<double> raw;
  if (theta > 0)
    raw.push_back(theta);
  // Spans inside one band: freq[j] / freq[i] = q^(j - i).
  for (int64_t i = 0; i < half; ++i)
    for (int64_t j = i + 1; j < half; ++j)
      if ((i == 0 || j == i + 1 || j == half - 1) && freq[i] > 0 && freq[j] > 0)
        raw.push_back(qToTheta(
            std::pow(freq[j] / freq[i], 1.0 / static_cast<double>(j - i))));
  // Triples: g[i+2] - (q + q^2) g[i+1] + q^3 g[i] = 0 on any one band.
  for (int64_t i = 0; i + 2 < half; ++i)
    for (double q :
         rootsInUnitInterval(freq[i], -freq[i + 1], -freq[i + 1], freq[i + 2]))
      raw.push_back(qToTheta(q));
  llvm::SmallVector<double> thetas;
  auto add = [&](double t) {
    if (!(t > 1) || !std::isfinite(t) || t > 1e15)
      return;
    for (double seen : thetas)
      if (std::fabs(seen - t) <= 1e-9 * t)
        return;
    thetas.push_back(t);
  };
  // The config's first, then round values, then the estimates themselves.
  if (theta > 0)
    add(theta);
  for (int digits = 1; digits <= 6; ++digits)
    for (double t : raw)
      add(roundDigits(t, digits));
  for (double t : raw)
    add(t);

  llvm::SmallVector<RopeFit> proposals;
  for (double t : thetas) {
    proposals.clear();
    fitAtTheta(freq, rot, t, proposals);
    for (const RopeFit &fit : proposals)
      if (reproduces(freq, rot, fit, relTolerance))
        fits.push_back(fit);
    if (fits.size() >= 8)
      break;
  }
  return fits;
}
