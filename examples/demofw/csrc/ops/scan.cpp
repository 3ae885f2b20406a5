// demofw.cumsum / cumprod / cummax: inclusive scans over the flattened tensor.
#include <cmath>
#include <complex>

#include "core/Reduce.h"

namespace dfw {
namespace {

enum class Scan { SUM, PROD, MAX };

template <Scan S, typename T>
T scan_combine(T a, T b) {
  if constexpr (S == Scan::SUM) return static_cast<T>(a + b);
  if constexpr (S == Scan::PROD) return static_cast<T>(a * b);
  if constexpr (S == Scan::MAX) {
    if constexpr (is_complex_v<T>) {
      return a;  // unreachable: rejected before dispatch
    } else {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return NAN;
      }
      return a < b ? b : a;
    }
  }
}

// Blocked scan: per-block local scan followed by a carry fix-up pass, the shape a
// parallel scan takes (blocks would be independent tasks).
template <Scan S, typename T>
void blocked_scan(const T* in, T* out, int64_t n) {
  constexpr int64_t B = 2048;
  bool have_carry = false;
  T carry{};
  for (int64_t start = 0; start < n; start += B) {
    const int64_t end = start + B < n ? start + B : n;
    out[start] = in[start];
    for (int64_t i = start + 1; i < end; ++i) out[i] = scan_combine<S>(out[i - 1], in[i]);
    if (have_carry) {
      for (int64_t i = start; i < end; ++i) out[i] = scan_combine<S>(carry, out[i]);
    }
    carry = out[end - 1];
    have_carry = true;
  }
}

template <Scan S>
Tensor scan_impl(const Tensor& a, const char* name) {
  ScalarType dt = a.dtype;
  if (S != Scan::MAX && (dt == ScalarType::Bool || is_integral(dt, false))) dt = ScalarType::Long;
  if (S == Scan::MAX && is_complex(dt)) throw_unsupported(name, dt);
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_ALL_TYPES(dt, name, [&]() -> Tensor {
    Tensor out = Tensor::empty(flat.sizes, dt);
    if (flat.numel() > 0) blocked_scan<S>(flat.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), flat.numel());
    return out;
  });
}

Tensor cumsum_impl(const Tensor& a) { return scan_impl<Scan::SUM>(a, "cumsum"); }
Tensor cumprod_impl(const Tensor& a) { return scan_impl<Scan::PROD>(a, "cumprod"); }
Tensor cummax_impl(const Tensor& a) { return scan_impl<Scan::MAX>(a, "cummax"); }

}  // namespace
DFW_REGISTER_REDUCTION(cumsum, cumsum_impl)
DFW_REGISTER_REDUCTION(cumprod, cumprod_impl)
DFW_REGISTER_REDUCTION(cummax, cummax_impl)
}  // namespace dfw
