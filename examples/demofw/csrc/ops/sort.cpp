// demofw.sort / argsort / unique: stable sorts of the flattened tensor, NaN last.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/Reduce.h"

namespace dfw {
namespace {

template <typename T>
struct NanLastLess {
  bool operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return false;
      if (std::isnan(b)) return true;
    }
    return a < b;
  }
};

Tensor sort_impl(const Tensor& a) {
  const Tensor flat = flat_contiguous(a, a.dtype);
  return DFW_DISPATCH_REAL_TYPES_AND_BOOL(a.dtype, "sort", [&]() -> Tensor {
    Tensor out = Tensor::empty(flat.sizes, a.dtype);
    const scalar_t* in = flat.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    std::copy(in, in + flat.numel(), o);
    std::stable_sort(o, o + flat.numel(), NanLastLess<scalar_t>{});
    return out;
  });
}

Tensor argsort_impl(const Tensor& a) {
  const Tensor flat = flat_contiguous(a, a.dtype);
  return DFW_DISPATCH_REAL_TYPES_AND_BOOL(a.dtype, "argsort", [&]() -> Tensor {
    Tensor out = Tensor::empty(flat.sizes, ScalarType::Long);
    const scalar_t* in = flat.data_ptr<scalar_t>();
    int64_t* idx = out.data_ptr<int64_t>();
    std::iota(idx, idx + flat.numel(), int64_t(0));
    const NanLastLess<scalar_t> less;
    std::stable_sort(idx, idx + flat.numel(), [&](int64_t x, int64_t y) { return less(in[x], in[y]); });
    return out;
  });
}

Tensor unique_impl(const Tensor& a) {
  const Tensor flat = flat_contiguous(a, a.dtype);
  return DFW_DISPATCH_REAL_TYPES_AND_BOOL(a.dtype, "unique", [&]() -> Tensor {
    const scalar_t* in = flat.data_ptr<scalar_t>();
    std::vector<scalar_t> v(in, in + flat.numel());
    std::sort(v.begin(), v.end(), NanLastLess<scalar_t>{});
    const NanLastLess<scalar_t> less;
    v.erase(std::unique(v.begin(), v.end(), [&](scalar_t x, scalar_t y) { return !less(x, y) && !less(y, x); }),
            v.end());
    Tensor out = Tensor::empty({static_cast<int64_t>(v.size())}, a.dtype);
    std::copy(v.begin(), v.end(), out.data_ptr<scalar_t>());
    return out;
  });
}

}  // namespace
DFW_REGISTER_REDUCTION(sort, sort_impl)
DFW_REGISTER_REDUCTION(argsort, argsort_impl)
DFW_REGISTER_REDUCTION(unique, unique_impl)
}  // namespace dfw
