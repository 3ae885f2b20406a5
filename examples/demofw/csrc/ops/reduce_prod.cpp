// demofw.prod / all / any: multiplicative and logical full reductions.
#include <complex>

#include "core/Reduce.h"

namespace dfw {
namespace {

struct Times {
  template <typename A>
  A operator()(A a, A b) const { return a * b; }
};

template <typename scalar_t>
Tensor prod_typed(const Tensor& flat) {
  using acc_t = acc_type_t<scalar_t>;
  const acc_t p = cascade_reduce<4, 1024>(flat.data_ptr<scalar_t>(), flat.numel(), acc_t(1), Times{});
  if constexpr (std::is_integral_v<scalar_t>) {
    return scalar_tensor<int64_t>(p);
  } else {
    return scalar_tensor<scalar_t>(static_cast<scalar_t>(p));
  }
}

Tensor prod_impl(const Tensor& a) {
  const ScalarType dt = a.dtype == ScalarType::Bool ? ScalarType::Long : a.dtype;
  const Tensor flat = flat_contiguous(a, dt);
  return DFW_DISPATCH_ALL_TYPES(dt, "prod", [&] { return prod_typed<scalar_t>(flat); });
}

template <bool ALL>
Tensor logical_reduce(const Tensor& a) {
  const Tensor flat = flat_contiguous(a, a.dtype);
  return DFW_DISPATCH_ALL_TYPES(a.dtype, ALL ? "all" : "any", [&]() -> Tensor {
    const scalar_t* p = flat.data_ptr<scalar_t>();
    const int64_t n = flat.numel();
    bool result = ALL;
    for (int64_t i = 0; i < n; ++i) {
      const bool nz = p[i] != scalar_t(0);
      if (ALL && !nz) { result = false; break; }
      if (!ALL && nz) { result = true; break; }
    }
    return scalar_tensor<bool>(result);
  });
}

Tensor all_impl(const Tensor& a) { return logical_reduce<true>(a); }
Tensor any_impl(const Tensor& a) { return logical_reduce<false>(a); }

}  // namespace
DFW_REGISTER_REDUCTION(prod, prod_impl)
DFW_REGISTER_REDUCTION(all, all_impl)
DFW_REGISTER_REDUCTION(any, any_impl)
}  // namespace dfw
