// demofw.amax / amin / argmax / argmin: NaN-propagating extrema over the flattened tensor.
#include <cmath>
#include <stdexcept>
#include <utility>

#include "core/Reduce.h"

namespace dfw {
namespace {

template <bool MAX, typename T>
inline bool better(T candidate, T current) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(current)) return false;
    if (std::isnan(candidate)) return true;
  }
  return MAX ? current < candidate : candidate < current;
}

template <bool MAX, typename T>
std::pair<T, int64_t> extremum(const T* p, int64_t n) {
  if (n == 0) throw std::invalid_argument(MAX ? "amax/argmax of an empty tensor" : "amin/argmin of an empty tensor");
  // 4 interleaved lanes, merged keeping the lowest index on ties (numpy semantics)
  constexpr int L = 4;
  std::pair<T, int64_t> lanes[L];
  for (int l = 0; l < L; ++l) lanes[l] = {p[0], 0};
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (int l = 0; l < L; ++l) {
      if (better<MAX>(p[i + l], lanes[l].first)) lanes[l] = {p[i + l], i + l};
    }
  }
  for (; i < n; ++i) {
    if (better<MAX>(p[i], lanes[0].first)) lanes[0] = {p[i], i};
  }
  auto best = lanes[0];
  for (int l = 1; l < L; ++l) {
    const bool tie = !better<MAX>(lanes[l].first, best.first) && !better<MAX>(best.first, lanes[l].first);
    if (better<MAX>(lanes[l].first, best.first) || (tie && lanes[l].second < best.second)) {
      best = lanes[l];
    }
  }
  return best;
}

template <bool MAX, bool ARG>
Tensor extremum_impl(const Tensor& a) {
  const Tensor flat = flat_contiguous(a, a.dtype);
  const char* name = MAX ? (ARG ? "argmax" : "amax") : (ARG ? "argmin" : "amin");
  return DFW_DISPATCH_REAL_TYPES_AND_BOOL(a.dtype, name, [&]() -> Tensor {
    const auto r = extremum<MAX>(flat.data_ptr<scalar_t>(), flat.numel());
    if constexpr (ARG) {
      return scalar_tensor<int64_t>(r.second);
    } else {
      return scalar_tensor<scalar_t>(r.first);
    }
  });
}

Tensor amax_impl(const Tensor& a) { return extremum_impl<true, false>(a); }
Tensor amin_impl(const Tensor& a) { return extremum_impl<false, false>(a); }
Tensor argmax_impl(const Tensor& a) { return extremum_impl<true, true>(a); }
Tensor argmin_impl(const Tensor& a) { return extremum_impl<false, true>(a); }

}  // namespace
DFW_REGISTER_REDUCTION(amax, amax_impl)
DFW_REGISTER_REDUCTION(amin, amin_impl)
DFW_REGISTER_REDUCTION(argmax, argmax_impl)
DFW_REGISTER_REDUCTION(argmin, argmin_impl)
}  // namespace dfw
