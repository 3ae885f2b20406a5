// demofw.remainder / demofw.fmod: Python-style (sign of divisor) and C-style remainders.
#include <cmath>
#include <stdexcept>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

template <bool PYTHON_STYLE>
struct RemainderOp {
  template <typename T>
  static constexpr bool supports() { return is_real_v<T>; }
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) throw std::domain_error("ZeroDivisionError: integer remainder by zero");
      T r = static_cast<T>(a % b);
      if constexpr (PYTHON_STYLE && std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    } else {
      T r = std::fmod(a, b);
      if constexpr (PYTHON_STYLE) {
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      }
      return r;
    }
  }
};

Tensor remainder_impl(const Tensor& a, const Tensor& b) {
  return binary_op<RemainderOp<true>>("remainder", a, b, Promotion::NoBool);
}
Tensor fmod_impl(const Tensor& a, const Tensor& b) {
  return binary_op<RemainderOp<false>>("fmod", a, b, Promotion::NoBool);
}

}  // namespace
DFW_REGISTER_BINARY(remainder, remainder_impl)
DFW_REGISTER_BINARY(fmod, fmod_impl)
}  // namespace dfw
