// demofw.norm (L2) / var / std (population, two-pass with Welford merge per lane).
#include <cmath>
#include <complex>

#include "core/Reduce.h"

namespace dfw {
namespace {

template <typename T>
double abs2(T v) {
  if constexpr (is_complex_v<T>) {
    return std::norm(std::complex<double>(v));
  } else {
    return static_cast<double>(v) * static_cast<double>(v);
  }
}

struct Welford {
  double mean = 0, m2 = 0;
  int64_t n = 0;
  void add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
  }
  static Welford merge(const Welford& a, const Welford& b) {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    Welford r;
    r.n = a.n + b.n;
    const double d = b.mean - a.mean;
    r.mean = a.mean + d * static_cast<double>(b.n) / static_cast<double>(r.n);
    r.m2 = a.m2 + b.m2 + d * d * static_cast<double>(a.n) * static_cast<double>(b.n) / static_cast<double>(r.n);
    return r;
  }
};

template <typename scalar_t>
Tensor norm_typed(const Tensor& flat) {
    const scalar_t* p = flat.data_ptr<scalar_t>();
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t n = flat.numel();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) lanes[l] += abs2(p[i + l]);
    for (; i < n; ++i) lanes[0] += abs2(p[i]);
    double s = 0;
    for (double v : lanes) s += v;
    using real_t = value_type_t<scalar_t>;
    return scalar_tensor<real_t>(static_cast<real_t>(std::sqrt(s)));
}

Tensor norm_impl(const Tensor& a) {
  const ScalarType dt = to_floating(a.dtype);
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_FLOATING_AND_COMPLEX_TYPES(dt, "norm", [&] { return norm_typed<scalar_t>(flat); });
}

template <bool STD>
Tensor moments_impl(const Tensor& a) {
  const ScalarType dt = to_floating(a.dtype);
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_FLOATING_TYPES(dt, STD ? "std" : "var", [&]() -> Tensor {
    const scalar_t* p = flat.data_ptr<scalar_t>();
    Welford lanes[4];
    const int64_t n = flat.numel();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int l = 0; l < 4; ++l) lanes[l].add(static_cast<double>(p[i + l]));
    for (; i < n; ++i) lanes[0].add(static_cast<double>(p[i]));
    Welford w = Welford::merge(Welford::merge(lanes[0], lanes[1]), Welford::merge(lanes[2], lanes[3]));
    const double var = w.n > 0 ? w.m2 / static_cast<double>(w.n) : NAN;
    return scalar_tensor<scalar_t>(static_cast<scalar_t>(STD ? std::sqrt(var) : var));
  });
}

Tensor var_impl(const Tensor& a) { return moments_impl<false>(a); }
Tensor std_impl(const Tensor& a) { return moments_impl<true>(a); }

}  // namespace
DFW_REGISTER_REDUCTION(norm, norm_impl)
DFW_REGISTER_REDUCTION(var, var_impl)
DFW_REGISTER_REDUCTION(std, std_impl)
}  // namespace dfw
