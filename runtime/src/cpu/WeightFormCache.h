//===- WeightFormCache.h - forms derived from a weight, kept while it lives
//===//
//
// A packed (or otherwise rearranged) copy of a weight is worth keeping only
// while the weight itself is unchanged; the runtime keeps such forms for
// weights that do not change (Context::setConstantWeights) and recognizes a
// weight by its first element, its shape and its allocation: a new tensor
// at a freed tensor's address has another allocation, and views of one
// allocation at one address in other shapes are other weights. Forms of
// weights whose allocation is gone are dropped on the next miss.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_WEIGHTFORMCACHE_H
#define TPRT_CPU_WEIGHTFORMCACHE_H

#include "tprt/tprt.h"

#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tprt::cpu {

/// Whether two weak pointers share an allocation (also once it is gone).
inline bool sameAllocation(const std::weak_ptr<const void> &a,
                           const std::weak_ptr<const void> &b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

/// Forms of type `Form` derived from weights, several per weight where
/// `matches` tells them apart (a layout, a row count). Thread-safe; the
/// references it returns stay valid until the weight's allocation is gone
/// and a later miss drops its forms.
template <typename Form> class WeightFormCache {
public:
  /// The form of `w` for which `matches(form)` holds, made by `make()` on a
  /// miss. With `onePerWeight`, a new form replaces `w`'s others (each
  /// costs the weight's size; a program uses one row count, say).
  template <typename Matches, typename Make>
  const Form &get(const Tensor &w, Matches matches, Make make,
                  bool onePerWeight = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::weak_ptr<const void> owner = w.allocation();
    auto [first, last] = forms_.equal_range(w.raw());
    for (auto it = first; it != last;) {
      bool same = it->second.shape == w.shape() &&
                  sameAllocation(it->second.owner, owner);
      if (same && matches(it->second.form))
        return it->second.form;
      it = same && onePerWeight ? forms_.erase(it) : std::next(it);
    }
    for (auto it = forms_.begin(); it != forms_.end();)
      it = it->second.owner.expired() ? forms_.erase(it) : std::next(it);
    return forms_.emplace(w.raw(), Entry{owner, w.shape(), make()})
        ->second.form;
  }

private:
  struct Entry {
    std::weak_ptr<const void> owner;
    std::vector<int64_t> shape;
    Form form;
  };
  std::mutex mutex_;
  /// By the weight's first element (node-based: references stay valid).
  std::multimap<const void *, Entry> forms_;
};

} // namespace tprt::cpu

#endif // TPRT_CPU_WEIGHTFORMCACHE_H
