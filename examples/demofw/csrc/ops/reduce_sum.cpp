// demofw.sum / mean / nansum: full reductions (integral sums accumulate in int64).
#include <cmath>
#include <complex>

#include "core/Reduce.h"

namespace dfw {
namespace {

struct Plus {
  template <typename A>
  A operator()(A a, A b) const { return a + b; }
};

template <typename scalar_t>
auto sum_kernel(const Tensor& flat) {
  using acc_t = acc_type_t<scalar_t>;
  return cascade_reduce<8, 4096>(flat.data_ptr<scalar_t>(), flat.numel(), acc_t(0), Plus{});
}

template <typename scalar_t>
Tensor sum_typed(const Tensor& flat) {
  if constexpr (std::is_integral_v<scalar_t>) {
    return scalar_tensor<int64_t>(sum_kernel<scalar_t>(flat));
  } else {
    return scalar_tensor<scalar_t>(static_cast<scalar_t>(sum_kernel<scalar_t>(flat)));
  }
}

Tensor sum_impl(const Tensor& a) {
  const ScalarType dt = a.dtype == ScalarType::Bool ? ScalarType::Long : a.dtype;
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_ALL_TYPES(dt, "sum", [&] { return sum_typed<scalar_t>(flat); });
}

Tensor mean_impl(const Tensor& a) {
  const ScalarType dt = to_floating(a.dtype);
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_FLOATING_AND_COMPLEX_TYPES(dt, "mean", [&]() -> Tensor {
    const auto s = sum_kernel<scalar_t>(flat);
    using acc_t = std::remove_const_t<decltype(s)>;
    return scalar_tensor<scalar_t>(static_cast<scalar_t>(s / acc_t(static_cast<double>(flat.numel()))));
  });
}

Tensor nansum_impl(const Tensor& a) {
  const ScalarType dt = to_floating(a.dtype);
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_FLOATING_TYPES(dt, "nansum", [&]() -> Tensor {
    const double s = cascade_reduce<8, 4096>(flat.data_ptr<scalar_t>(), flat.numel(), 0.0,
                                             [](double x, double y) { return std::isnan(y) ? x : x + y; });
    return scalar_tensor<scalar_t>(static_cast<scalar_t>(s));
  });
}

}  // namespace
DFW_REGISTER_REDUCTION(sum, sum_impl)
DFW_REGISTER_REDUCTION(mean, mean_impl)
DFW_REGISTER_REDUCTION(nansum, nansum_impl)
}  // namespace dfw
