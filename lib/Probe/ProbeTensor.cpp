//===- ProbeTensor.cpp - evaluate ONNX side computations ------------------===//

#include "tpopt/Probe/ProbeTensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::tp;

namespace {

using Kind = ProbeTensor::Kind;

/// The probe never needs large side tensors; refuse to build one.
constexpr int64_t kMaxElements = int64_t(1) << 24;

/// The element count of `shape`, saturating at INT64_MAX (so that a size
/// check on it cannot be fooled by a wrapped product); negative dimensions
/// count as 0 (checkSize rejects them).
int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d <= 0 || __builtin_mul_overflow(n, d, &n))
      return d < 0 ? 0 : d == 0 ? 0 : std::numeric_limits<int64_t>::max();
  return n;
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Advances the row-major multi-index `idx` within `shape`.
void nextIndex(SmallVectorImpl<int64_t> &idx, ArrayRef<int64_t> shape) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (++idx[d] < shape[d])
      return;
    idx[d] = 0;
  }
}

/// Fills `out.data` in row-major order of `shape`, element by element,
/// from `valueAt(index)`.
template <typename ValueAt>
void fillByIndex(ProbeTensor &out, ArrayRef<int64_t> shape, ValueAt valueAt) {
  SmallVector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0, n = out.data.size(); flat < n; ++flat) {
    out.data[flat] = valueAt(idx);
    nextIndex(idx, shape);
  }
}

/// Stores `v` the way a tensor of `kind` (f32 for floats) would.
double storeAs(Kind kind, double v) {
  switch (kind) {
  case Kind::Float:
    return static_cast<double>(static_cast<float>(v));
  case Kind::Int:
    return std::trunc(v);
  case Kind::Bool:
    return v != 0.0 ? 1.0 : 0.0;
  }
  return v;
}

struct Evaluator {
  StringRef op;
  DictionaryAttr attrs;
  ArrayRef<std::optional<ProbeTensor>> in;
  std::string error;

  bool fail(const Twine &message) {
    error = message.str();
    return false;
  }

  const ProbeTensor *input(unsigned i) {
    if (i < in.size() && in[i])
      return &*in[i];
    return nullptr;
  }

  int64_t intAttr(StringRef name, int64_t defaultValue) {
    if (auto attr = attrs ? attrs.getAs<IntegerAttr>(name) : IntegerAttr())
      return attr.getInt();
    return defaultValue;
  }

  std::optional<SmallVector<int64_t>> intsAttr(StringRef name) {
    if (!attrs)
      return std::nullopt;
    if (auto attr = attrs.getAs<DenseI64ArrayAttr>(name))
      return SmallVector<int64_t>(attr.asArrayRef());
    return std::nullopt;
  }

  /// Ints from an attribute or, in newer opsets, from input `index`.
  std::optional<SmallVector<int64_t>> intsFrom(StringRef name, unsigned index) {
    if (auto fromAttr = intsAttr(name))
      return fromAttr;
    if (const ProbeTensor *t = input(index)) {
      SmallVector<int64_t> values;
      for (double v : t->data)
        values.push_back(probeInt(v));
      return values;
    }
    return std::nullopt;
  }

  bool checkSize(ArrayRef<int64_t> shape, ProbeTensor &out) {
    for (int64_t d : shape)
      if (d < 0)
        return fail("negative dimension in a probe tensor");
    if (product(shape) > kMaxElements)
      return fail("a side computation is too large to evaluate");
    out.shape.assign(shape.begin(), shape.end());
    out.data.assign(product(shape), 0.0);
    return true;
  }

  static bool broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &out) {
    size_t rank = std::max(a.size(), b.size());
    out.assign(rank, 1);
    for (size_t i = 0; i < rank; ++i) {
      int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
      int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
      if (da != db && da != 1 && db != 1)
        return false;
      out[i] = da == 1 ? db : da;
    }
    return true;
  }

  static int64_t broadcastIndex(const ProbeTensor &t, ArrayRef<int64_t> idx) {
    return t.broadcastIndex(idx);
  }

  bool elementwise(ArrayRef<const ProbeTensor *> operands, Kind kind,
                   const std::function<double(ArrayRef<double>)> &fn,
                   ProbeTensor &out) {
    SmallVector<int64_t> shape;
    for (const ProbeTensor *t : operands) {
      SmallVector<int64_t> next;
      if (!broadcastShapes(shape, t->shape, next))
        return fail("operand shapes do not broadcast");
      shape = next;
    }
    out.kind = kind;
    if (!checkSize(shape, out))
      return false;
    SmallVector<double> args(operands.size());
    fillByIndex(out, shape, [&](ArrayRef<int64_t> idx) {
      for (size_t k = 0; k < operands.size(); ++k)
        args[k] = operands[k]->data[broadcastIndex(*operands[k], idx)];
      return storeAs(kind, fn(args));
    });
    return true;
  }

  bool unary(std::function<double(double)> fn, ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    return elementwise(
        {x}, x->kind, [&](ArrayRef<double> a) { return fn(a[0]); }, out);
  }

  bool binary(std::function<double(double, double)> fn, ProbeTensor &out,
              std::optional<Kind> kind = std::nullopt) {
    const ProbeTensor *a = input(0), *b = input(1);
    if (!a || !b)
      return fail("missing input");
    return elementwise(
        {a, b}, kind.value_or(a->kind),
        [&](ArrayRef<double> v) { return fn(v[0], v[1]); }, out);
  }

  static int64_t normAxis(int64_t axis, int64_t rank) {
    return axis < 0 ? axis + rank : axis;
  }

  bool reshape(const ProbeTensor &x, ArrayRef<int64_t> target, bool allowZero,
               ProbeTensor &out) {
    SmallVector<int64_t> shape(target.begin(), target.end());
    int64_t inferred = -1, known = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowZero) {
        if (i >= x.shape.size())
          return fail("Reshape copies a dimension the input lacks");
        shape[i] = x.shape[i];
      }
      if (shape[i] == -1) {
        if (inferred >= 0)
          return fail("Reshape has two -1 dimensions");
        inferred = i;
        continue;
      }
      if (shape[i] < 0 || __builtin_mul_overflow(known, shape[i], &known))
        return fail("Reshape to a negative or overflowing shape");
    }
    if (inferred >= 0) {
      if (known == 0 || x.numElements() % known != 0)
        return fail("Reshape cannot infer its -1 dimension");
      shape[inferred] = x.numElements() / known;
    }
    if (product(shape) != x.numElements())
      return fail("Reshape changes the element count");
    out = x;
    out.shape = shape;
    return true;
  }

  bool run(std::vector<ProbeTensor> &results);

  // One function per operator; `out` is the first result.

  bool evalIdentity(ProbeTensor &out) {
    if (!input(0))
      return fail("missing input");
    out = *input(0);
    return true;
  }

  bool evalConstant(ProbeTensor &out) {
    if (auto value = attrs.getAs<DenseElementsAttr>("value")) {
      out = ProbeTensor::fromAttr(value);
      return true;
    }
    if (auto v = attrs.getAs<IntegerAttr>("value_int")) {
      out = ProbeTensor::ints({}, {double(v.getInt())});
      return true;
    }
    if (auto v = attrs.getAs<FloatAttr>("value_float")) {
      out.kind = Kind::Float;
      out.data = {v.getValueAsDouble()};
      return true;
    }
    if (auto v = intsAttr("value_ints")) {
      out = ProbeTensor::ints({static_cast<int64_t>(v->size())},
                              std::vector<double>(v->begin(), v->end()));
      return true;
    }
    return fail("Constant without a supported value");
  }

  bool evalConstantOfShape(ProbeTensor &out) {
    const ProbeTensor *shapeT = input(0);
    if (!shapeT)
      return fail("missing input");
    SmallVector<int64_t> shape = probeInts(*shapeT);
    ProbeTensor fill;
    fill.kind = Kind::Float;
    fill.data = {0.0};
    if (auto value = attrs ? attrs.getAs<DenseElementsAttr>("value")
                           : DenseElementsAttr())
      fill = ProbeTensor::fromAttr(value);
    out.kind = fill.kind;
    if (!checkSize(shape, out))
      return false;
    std::fill(out.data.begin(), out.data.end(), fill.data.front());
    return true;
  }

  bool evalShape(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    int64_t rank = x->rank();
    int64_t start = normAxis(intAttr("start", 0), rank);
    int64_t end = normAxis(intAttr("end", rank), rank);
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    std::vector<double> dims(x->shape.begin() + start, x->shape.begin() + end);
    out = ProbeTensor::ints({end - start}, dims);
    return true;
  }

  bool evalCast(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    int64_t to = intAttr("to", 1);
    Kind kind = (to == 9)                                       ? Kind::Bool
                : (to == 1 || to == 10 || to == 11 || to == 16) ? Kind::Float
                                                                : Kind::Int;
    return elementwise(
        {x}, kind, [](ArrayRef<double> a) { return a[0]; }, out);
  }

  bool evalGather(ProbeTensor &out) {
    const ProbeTensor *data = input(0), *indices = input(1);
    if (!data || !indices)
      return fail("missing input");
    int64_t axis = normAxis(intAttr("axis", 0), data->rank());
    if (axis < 0 || axis >= data->rank())
      return fail("Gather axis out of range");
    SmallVector<int64_t> shape(data->shape.begin(), data->shape.begin() + axis);
    shape.append(indices->shape.begin(), indices->shape.end());
    shape.append(data->shape.begin() + axis + 1, data->shape.end());
    out.kind = data->kind;
    if (!checkSize(shape, out))
      return false;
    int64_t outer = product(ArrayRef<int64_t>(data->shape).take_front(axis));
    int64_t inner =
        product(ArrayRef<int64_t>(data->shape).drop_front(axis + 1));
    int64_t dim = data->shape[axis];
    int64_t nIdx = indices->numElements();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < nIdx; ++k) {
        int64_t idx = static_cast<int64_t>(indices->data[k]);
        if (idx < 0)
          idx += dim;
        if (idx < 0 || idx >= dim)
          return fail("Gather index out of range");
        for (int64_t i = 0; i < inner; ++i)
          out.data[(o * nIdx + k) * inner + i] =
              data->data[(o * dim + idx) * inner + i];
      }
    return true;
  }

  bool evalRange(ProbeTensor &out) {
    const ProbeTensor *start = input(0), *limit = input(1), *delta = input(2);
    if (!start || !limit || !delta)
      return fail("missing input");
    if (!start->isScalarLike() || !limit->isScalarLike() ||
        !delta->isScalarLike())
      return fail("Range takes scalar start, limit and delta");
    double s = start->scalar(), l = limit->scalar(), d = delta->scalar();
    if (d == 0)
      return fail("Range with a zero delta");
    double count = std::ceil((l - s) / d);
    if (!std::isfinite(count) || count > double(kMaxElements))
      return fail("Range of a non-finite or too large length");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    out.kind = start->kind;
    if (!checkSize({n}, out))
      return false;
    for (int64_t i = 0; i < n; ++i)
      out.data[i] = storeAs(out.kind, s + i * d);
    return true;
  }

  bool evalFlatten(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    int64_t axis = normAxis(intAttr("axis", 1), x->rank());
    if (axis < 0 || axis > x->rank())
      return fail("Flatten axis out of range");
    out = *x;
    out.shape = {product(ArrayRef<int64_t>(x->shape).take_front(axis)),
                 product(ArrayRef<int64_t>(x->shape).drop_front(axis))};
    return true;
  }

  bool evalGatherND(ProbeTensor &out) {
    const ProbeTensor *data = input(0), *indices = input(1);
    if (!data || !indices || indices->rank() < 1)
      return fail("missing input");
    if (intAttr("batch_dims", 0) != 0)
      return fail("GatherND with batch_dims is not supported");
    int64_t depth = indices->shape.back();
    if (depth > data->rank())
      return fail("GatherND index depth exceeds the data rank");
    SmallVector<int64_t> shape(indices->shape.begin(),
                               indices->shape.end() - 1);
    shape.append(data->shape.begin() + depth, data->shape.end());
    out.kind = data->kind;
    if (!checkSize(shape, out))
      return false;
    SmallVector<int64_t> strides = stridesOf(data->shape);
    int64_t inner = product(ArrayRef<int64_t>(data->shape).drop_front(depth));
    int64_t count = product(ArrayRef<int64_t>(indices->shape).drop_back());
    for (int64_t n = 0; n < count; ++n) {
      int64_t base = 0;
      for (int64_t d = 0; d < depth; ++d) {
        int64_t idx = probeInt(indices->data[n * depth + d]);
        if (idx < 0)
          idx += data->shape[d];
        if (idx < 0 || idx >= data->shape[d])
          return fail("GatherND index out of range");
        base += idx * strides[d];
      }
      std::copy_n(data->data.begin() + base, inner,
                  out.data.begin() + n * inner);
    }
    return true;
  }

  bool evalUnsqueezeOrSqueeze(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    std::optional<SmallVector<int64_t>> axes = intsFrom("axes", 1);
    SmallVector<int64_t> shape(x->shape.begin(), x->shape.end());
    if (op == "Unsqueeze") {
      if (!axes)
        return fail("Unsqueeze without axes");
      int64_t rank = shape.size() + axes->size();
      SmallVector<int64_t> sorted;
      for (int64_t a : *axes)
        sorted.push_back(normAxis(a, rank));
      llvm::sort(sorted);
      for (int64_t a : sorted) {
        if (a < 0 || a > static_cast<int64_t>(shape.size()))
          return fail("Unsqueeze axis out of range");
        shape.insert(shape.begin() + a, 1);
      }
    } else {
      SmallVector<int64_t> kept;
      for (int64_t i = 0; i < x->rank(); ++i) {
        bool drop = axes ? llvm::is_contained(*axes, i) ||
                               llvm::is_contained(*axes, i - x->rank())
                         : x->shape[i] == 1;
        if (drop && x->shape[i] != 1)
          return fail("Squeeze of a dimension that is not 1");
        if (!drop)
          kept.push_back(x->shape[i]);
      }
      shape = kept;
    }
    out = *x;
    out.shape = shape;
    return true;
  }

  bool evalReshape(ProbeTensor &out) {
    const ProbeTensor *x = input(0), *shapeT = input(1);
    if (!x || !shapeT)
      return fail("missing input");
    SmallVector<int64_t> target = probeInts(*shapeT);
    return reshape(*x, target, intAttr("allowzero", 0) != 0, out);
  }

  bool evalConcat(ProbeTensor &out) {
    SmallVector<const ProbeTensor *> parts;
    for (unsigned i = 0; i < in.size(); ++i)
      if (const ProbeTensor *t = input(i))
        parts.push_back(t);
    if (parts.empty())
      return fail("Concat without inputs");
    int64_t rank = parts.front()->rank();
    int64_t axis = normAxis(intAttr("axis", 0), rank);
    if (axis < 0 || axis >= rank)
      return fail("Concat axis out of range");
    SmallVector<int64_t> shape(parts.front()->shape.begin(),
                               parts.front()->shape.end());
    shape[axis] = 0;
    for (const ProbeTensor *t : parts) {
      if (t->rank() != rank)
        return fail("Concat of different ranks");
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t->shape[d] != shape[d])
          return fail("Concat inputs differ outside the concatenation axis");
      shape[axis] += t->shape[axis];
    }
    out.kind = parts.front()->kind;
    if (!checkSize(shape, out))
      return false;
    int64_t outer = product(ArrayRef<int64_t>(shape).take_front(axis));
    int64_t inner = product(ArrayRef<int64_t>(shape).drop_front(axis + 1));
    int64_t pos = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (const ProbeTensor *t : parts) {
        int64_t chunk = t->shape[axis] * inner;
        std::copy_n(t->data.begin() + o * chunk, chunk, out.data.begin() + pos);
        pos += chunk;
      }
    return true;
  }

  bool evalExpand(ProbeTensor &out) {
    const ProbeTensor *x = input(0), *shapeT = input(1);
    if (!x || !shapeT)
      return fail("missing input");
    SmallVector<int64_t> target = probeInts(*shapeT);
    SmallVector<int64_t> shape;
    if (!broadcastShapes(x->shape, target, shape))
      return fail("Expand shapes do not broadcast");
    if (!checkSize(shape, out))
      return false;
    out.kind = x->kind;
    fillByIndex(out, shape, [&](ArrayRef<int64_t> idx) {
      return x->data[broadcastIndex(*x, idx)];
    });
    return true;
  }

  bool evalTranspose(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    SmallVector<int64_t> perm;
    if (auto p = intsAttr("perm"))
      perm = *p;
    else
      for (int64_t i = x->rank() - 1; i >= 0; --i)
        perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != x->rank())
      return fail("Transpose perm has the wrong length");
    SmallVector<int64_t> shape;
    SmallVector<bool> seen(x->rank(), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= x->rank() || seen[p])
        return fail("Transpose perm is not a permutation of the dimensions");
      seen[p] = true;
      shape.push_back(x->shape[p]);
    }
    out.kind = x->kind;
    if (!checkSize(shape, out))
      return false;
    SmallVector<int64_t> inStrides = stridesOf(x->shape);
    fillByIndex(out, shape, [&](ArrayRef<int64_t> idx) {
      int64_t src = 0;
      for (size_t d = 0; d < perm.size(); ++d)
        src += idx[d] * inStrides[perm[d]];
      return x->data[src];
    });
    return true;
  }

  bool evalSlice(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    std::optional<SmallVector<int64_t>> starts = intsFrom("starts", 1);
    std::optional<SmallVector<int64_t>> ends = intsFrom("ends", 2);
    if (!starts || !ends || starts->size() != ends->size())
      return fail("Slice without matching starts and ends");
    SmallVector<int64_t> axes, steps(starts->size(), 1);
    if (auto a = intsFrom("axes", 3))
      axes = *a;
    else
      for (size_t i = 0; i < starts->size(); ++i)
        axes.push_back(i);
    if (auto s = intsFrom("steps", 4))
      steps = *s;
    SmallVector<int64_t> begin(x->rank(), 0), step(x->rank(), 1);
    SmallVector<int64_t> shape(x->shape.begin(), x->shape.end());
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t axis = normAxis(axes[i], x->rank());
      if (axis < 0 || axis >= x->rank() || steps[i] == 0)
        return fail("Slice axis or step out of range");
      int64_t dim = x->shape[axis];
      auto clampIndex = [&](int64_t v) {
        if (v < 0)
          v += dim;
        if (steps[i] > 0)
          return std::clamp<int64_t>(v, 0, dim);
        return std::clamp<int64_t>(v, -1, dim - 1);
      };
      int64_t s = clampIndex((*starts)[i]);
      int64_t e = clampIndex((*ends)[i]);
      int64_t n =
          steps[i] > 0
              ? std::max<int64_t>(0, (e - s + steps[i] - 1) / steps[i])
              : std::max<int64_t>(0, (s - e - steps[i] - 1) / -steps[i]);
      begin[axis] = s;
      step[axis] = steps[i];
      shape[axis] = n;
    }
    out.kind = x->kind;
    if (!checkSize(shape, out))
      return false;
    SmallVector<int64_t> inStrides = stridesOf(x->shape);
    fillByIndex(out, shape, [&](ArrayRef<int64_t> idx) {
      int64_t src = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        src += (begin[d] + idx[d] * step[d]) * inStrides[d];
      return x->data[src];
    });
    return true;
  }

  bool evalTrilu(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x || x->rank() < 2)
      return fail("Trilu needs a matrix");
    if (input(1) && !input(1)->isScalarLike())
      return fail("Trilu takes a scalar k");
    int64_t k = input(1) ? probeInt(input(1)->scalar()) : 0;
    bool upper = intAttr("upper", 1) != 0;
    out = *x;
    int64_t rows = x->shape[x->rank() - 2], cols = x->shape[x->rank() - 1];
    for (int64_t flat = 0, n = out.data.size(); flat < n; ++flat) {
      int64_t j = flat % cols, i = (flat / cols) % rows;
      bool keep = upper ? j - i >= k : j - i <= k;
      if (!keep)
        out.data[flat] = 0;
    }
    return true;
  }

  bool evalMatMul(ProbeTensor &out) {
    const ProbeTensor *a = input(0), *b = input(1);
    if (!a || !b || a->rank() < 1 || b->rank() < 1)
      return fail("missing input");
    ProbeTensor a2 = *a, b2 = *b;
    if (a2.rank() == 1)
      a2.shape.insert(a2.shape.begin(), 1);
    if (b2.rank() == 1)
      b2.shape.push_back(1);
    int64_t m = a2.shape[a2.rank() - 2], k = a2.shape[a2.rank() - 1];
    int64_t k2 = b2.shape[b2.rank() - 2], n = b2.shape[b2.rank() - 1];
    if (k != k2)
      return fail("MatMul inner dimensions differ");
    SmallVector<int64_t> batch;
    if (!broadcastShapes(ArrayRef<int64_t>(a2.shape).drop_back(2),
                         ArrayRef<int64_t>(b2.shape).drop_back(2), batch))
      return fail("MatMul batch dimensions do not broadcast");
    SmallVector<int64_t> shape = batch;
    shape.push_back(m);
    shape.push_back(n);
    out.kind = a->kind;
    if (!checkSize(shape, out))
      return false;
    ProbeTensor aBatch = a2, bBatch = b2;
    aBatch.shape.resize(a2.rank() - 2);
    bBatch.shape.resize(b2.rank() - 2);
    SmallVector<int64_t> idx(batch.size(), 0);
    for (int64_t bi = 0, nb = product(batch); bi < nb; ++bi) {
      int64_t ao = broadcastIndex(aBatch, idx) * m * k;
      int64_t bo = broadcastIndex(bBatch, idx) * k * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t t = 0; t < k; ++t)
            acc += a2.data[ao + i * k + t] * b2.data[bo + t * n + j];
          out.data[(bi * m + i) * n + j] = storeAs(out.kind, acc);
        }
      nextIndex(idx, batch);
    }
    if (a->rank() == 1 || b->rank() == 1) {
      SmallVector<int64_t> squeezed = batch;
      if (a->rank() != 1)
        squeezed.push_back(m);
      if (b->rank() != 1)
        squeezed.push_back(n);
      out.shape = squeezed;
    }
    return true;
  }

  bool evalCumSum(ProbeTensor &out) {
    const ProbeTensor *x = input(0), *axisT = input(1);
    if (!x || !axisT)
      return fail("missing input");
    if (!axisT->isScalarLike())
      return fail("CumSum takes a scalar axis");
    int64_t axis = normAxis(probeInt(axisT->scalar()), x->rank());
    if (axis < 0 || axis >= x->rank())
      return fail("CumSum axis out of range");
    if (intAttr("exclusive", 0) || intAttr("reverse", 0))
      return fail("exclusive or reverse CumSum is not supported");
    out = *x;
    int64_t inner = product(ArrayRef<int64_t>(x->shape).drop_front(axis + 1));
    int64_t dim = x->shape[axis];
    for (int64_t flat = 0, n = out.data.size(); flat < n; ++flat)
      if ((flat / inner) % dim != 0)
        out.data[flat] =
            storeAs(out.kind, out.data[flat] + out.data[flat - inner]);
    return true;
  }

  bool evalReduce(ProbeTensor &out) {
    const ProbeTensor *x = input(0);
    if (!x)
      return fail("missing input");
    SmallVector<int64_t> axes;
    if (auto a = intsFrom("axes", 1))
      for (int64_t v : *a)
        axes.push_back(normAxis(v, x->rank()));
    if (axes.empty())
      for (int64_t i = 0; i < x->rank(); ++i)
        axes.push_back(i);
    bool keep = intAttr("keepdims", 1) != 0;
    SmallVector<int64_t> kept(x->shape.begin(), x->shape.end());
    for (int64_t a : axes) {
      if (a < 0 || a >= x->rank())
        return fail(op + " axis out of range");
      kept[a] = 1;
    }
    out.kind = x->kind;
    if (!checkSize(kept, out))
      return false;
    SmallVector<int64_t> counts(out.data.size(), 0);
    SmallVector<int64_t> idx(x->rank(), 0);
    ProbeTensor keptShape;
    keptShape.shape = kept;
    for (int64_t flat = 0, n = x->data.size(); flat < n; ++flat) {
      int64_t dst = broadcastIndex(keptShape, idx);
      double v = x->data[flat];
      if (counts[dst] == 0)
        out.data[dst] = v;
      else if (op == "ReduceMax")
        out.data[dst] = std::max(out.data[dst], v);
      else if (op == "ReduceMin")
        out.data[dst] = std::min(out.data[dst], v);
      else
        out.data[dst] += v;
      ++counts[dst];
      nextIndex(idx, x->shape);
    }
    for (size_t i = 0; i < out.data.size(); ++i)
      out.data[i] = storeAs(out.kind, op == "ReduceMean" && counts[i]
                                          ? out.data[i] / counts[i]
                                          : out.data[i]);
    if (!keep) {
      SmallVector<int64_t> squeezed;
      for (int64_t i = 0; i < x->rank(); ++i)
        if (!llvm::is_contained(axes, i))
          squeezed.push_back(x->shape[i]);
      out.shape = squeezed;
    }
    return true;
  }

  bool evalWhere(ProbeTensor &out) {
    const ProbeTensor *c = input(0), *a = input(1), *b = input(2);
    if (!c || !a || !b)
      return fail("missing input");
    return elementwise(
        {c, a, b}, a->kind,
        [](ArrayRef<double> v) { return v[0] != 0 ? v[1] : v[2]; }, out);
  }
};

using EvalFn = bool (Evaluator::*)(ProbeTensor &);

/// The operators with an evaluation function of their own.
const llvm::StringMap<EvalFn> &getEvaluators() {
  static const llvm::StringMap<EvalFn> table = {
      {"Identity", &Evaluator::evalIdentity},
      {"Constant", &Evaluator::evalConstant},
      {"ConstantOfShape", &Evaluator::evalConstantOfShape},
      {"Shape", &Evaluator::evalShape},
      {"Cast", &Evaluator::evalCast},
      {"Gather", &Evaluator::evalGather},
      {"Range", &Evaluator::evalRange},
      {"Flatten", &Evaluator::evalFlatten},
      {"GatherND", &Evaluator::evalGatherND},
      {"Unsqueeze", &Evaluator::evalUnsqueezeOrSqueeze},
      {"Squeeze", &Evaluator::evalUnsqueezeOrSqueeze},
      {"Reshape", &Evaluator::evalReshape},
      {"Concat", &Evaluator::evalConcat},
      {"Expand", &Evaluator::evalExpand},
      {"Transpose", &Evaluator::evalTranspose},
      {"Slice", &Evaluator::evalSlice},
      {"Trilu", &Evaluator::evalTrilu},
      {"MatMul", &Evaluator::evalMatMul},
      {"CumSum", &Evaluator::evalCumSum},
      {"ReduceSum", &Evaluator::evalReduce},
      {"ReduceMax", &Evaluator::evalReduce},
      {"ReduceMin", &Evaluator::evalReduce},
      {"ReduceMean", &Evaluator::evalReduce},
      {"Where", &Evaluator::evalWhere},
  };
  return table;
}

using BinaryFn = double (*)(double, double);
struct BinaryOp {
  BinaryFn fn;
  /// The result is boolean (comparisons, logic), else the first operand's.
  bool boolean;
};

/// Elementwise binary operators (numpy broadcasting).
const llvm::StringMap<BinaryOp> &getBinaryOps() {
  static const llvm::StringMap<BinaryOp> table = {
      {"Add", {[](double a, double b) { return a + b; }, false}},
      {"Sub", {[](double a, double b) { return a - b; }, false}},
      {"Mul", {[](double a, double b) { return a * b; }, false}},
      {"Div", {[](double a, double b) { return a / b; }, false}},
      {"Mod",
       {[](double a, double b) {
          return b == 0 ? 0 : a - b * std::floor(a / b);
        },
        false}},
      {"Pow", {[](double a, double b) { return std::pow(a, b); }, false}},
      {"Min", {[](double a, double b) { return std::min(a, b); }, false}},
      {"Max", {[](double a, double b) { return std::max(a, b); }, false}},
      {"Equal", {[](double a, double b) { return double(a == b); }, true}},
      {"Less", {[](double a, double b) { return double(a < b); }, true}},
      {"LessOrEqual",
       {[](double a, double b) { return double(a <= b); }, true}},
      {"Greater", {[](double a, double b) { return double(a > b); }, true}},
      {"GreaterOrEqual",
       {[](double a, double b) { return double(a >= b); }, true}},
      {"And", {[](double a, double b) { return double(a && b); }, true}},
      {"Or", {[](double a, double b) { return double(a || b); }, true}},
      {"Xor", {[](double a, double b) { return double(!a != !b); }, true}},
  };
  return table;
}

/// ONNX's integer Div truncates (and the probe never divides by zero).
double truncatingDiv(double a, double b) {
  return b == 0 ? 0 : std::trunc(a / b);
}

using UnaryFn = double (*)(double);

/// Elementwise unary operators; the result keeps the operand's kind.
const llvm::StringMap<UnaryFn> &getUnaryOps() {
  static const llvm::StringMap<UnaryFn> table = {
      {"Not", [](double a) { return double(a == 0); }},
      {"Neg", [](double a) { return -a; }},
      {"Abs", [](double a) { return std::fabs(a); }},
      {"Sqrt", [](double a) { return std::sqrt(a); }},
      {"Reciprocal", [](double a) { return 1.0 / a; }},
      {"Exp", [](double a) { return std::exp(a); }},
      {"Cos", [](double a) { return std::cos(a); }},
      {"Sin", [](double a) { return std::sin(a); }},
      {"Floor", [](double a) { return std::floor(a); }},
      {"Ceil", [](double a) { return std::ceil(a); }},
  };
  return table;
}

bool Evaluator::run(std::vector<ProbeTensor> &results) {
  results.emplace_back();
  ProbeTensor &out = results.back();
  if (EvalFn fn = getEvaluators().lookup(op))
    return (this->*fn)(out);
  const llvm::StringMap<BinaryOp> &binaries = getBinaryOps();
  if (auto it = binaries.find(op); it != binaries.end()) {
    bool isInt = input(0) && input(0)->kind != Kind::Float;
    BinaryFn fn = op == "Div" && isInt ? truncatingDiv : it->second.fn;
    return binary(fn, out,
                  it->second.boolean ? std::optional<Kind>(Kind::Bool)
                                     : std::nullopt);
  }
  if (UnaryFn fn = getUnaryOps().lookup(op))
    return unary(fn, out);
  return fail("operator '" + op + "' cannot be evaluated at compile time");
}

} // namespace

int64_t ProbeTensor::numElements() const { return product(shape); }

int64_t ProbeTensor::broadcastIndex(ArrayRef<int64_t> idx) const {
  int64_t flat = 0, stride = 1;
  size_t offset = idx.size() - shape.size();
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    int64_t d = shape[i];
    flat += (d == 1 ? 0 : idx[i + offset]) * stride;
    stride *= d;
  }
  return flat;
}

std::optional<double> ProbeTensor::at(ArrayRef<int64_t> idx) const {
  if (shape.size() > idx.size() ||
      static_cast<int64_t>(data.size()) != numElements())
    return std::nullopt;
  size_t offset = idx.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && (idx[i + offset] < 0 || idx[i + offset] >= shape[i]))
      return std::nullopt;
  return data[broadcastIndex(idx)];
}

SmallVector<int64_t> mlir::tp::probeInts(const ProbeTensor &t) {
  SmallVector<int64_t> values;
  for (double d : t.data)
    values.push_back(probeInt(d));
  return values;
}

int64_t mlir::tp::probeInt(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 9.2e18)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9.2e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

ProbeTensor ProbeTensor::ints(ArrayRef<int64_t> shape,
                              std::vector<double> data) {
  ProbeTensor t;
  t.kind = Kind::Int;
  t.shape.assign(shape.begin(), shape.end());
  t.data = std::move(data);
  return t;
}

ProbeTensor ProbeTensor::fromAttr(DenseElementsAttr attr) {
  ProbeTensor t;
  auto type = cast<ShapedType>(attr.getType());
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  Type elem = type.getElementType();
  if (isa<FloatType>(elem)) {
    t.kind = Kind::Float;
    for (APFloat v : attr.getValues<APFloat>())
      t.data.push_back(v.convertToDouble());
  } else if (elem.isInteger(1)) {
    t.kind = Kind::Bool;
    for (bool v : attr.getValues<bool>())
      t.data.push_back(v);
  } else {
    t.kind = Kind::Int;
    bool isUnsigned = elem.isUnsignedInteger();
    for (APInt v : attr.getValues<APInt>())
      t.data.push_back(isUnsigned ? double(v.getZExtValue())
                                  : double(v.getSExtValue()));
  }
  return t;
}

llvm::Expected<std::vector<ProbeTensor>>
mlir::tp::evaluateOnnxOp(StringRef opType, DictionaryAttr attrs,
                         ArrayRef<std::optional<ProbeTensor>> inputs) {
  std::vector<ProbeTensor> results;
  Evaluator evaluator{opType, attrs, inputs, ""};
  if (!evaluator.run(results))
    return llvm::createStringError(evaluator.error);
  return results;
}
