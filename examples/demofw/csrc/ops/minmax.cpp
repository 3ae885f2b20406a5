// demofw.maximum / demofw.minimum: NaN-propagating element-wise max/min.
#include <cmath>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

template <bool MAX>
struct MinMaxOp {
  template <typename T>
  static constexpr bool supports() { return !is_complex_v<T>; }
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    if constexpr (MAX) {
      return a < b ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};

Tensor maximum_impl(const Tensor& a, const Tensor& b) {
  return binary_op<MinMaxOp<true>>("maximum", a, b, Promotion::Default);
}
Tensor minimum_impl(const Tensor& a, const Tensor& b) {
  return binary_op<MinMaxOp<false>>("minimum", a, b, Promotion::Default);
}

}  // namespace
DFW_REGISTER_BINARY(maximum, maximum_impl)
DFW_REGISTER_BINARY(minimum, minimum_impl)
}  // namespace dfw
