// demofw.pow: integer powers by squaring, std::pow for floating and complex types.
#include <cmath>
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

template <typename T>
T ipow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    exp = static_cast<T>(exp >> 1);
    base = static_cast<T>(base * base);
  }
  return result;
}

struct PowOp {
  template <typename T>
  static constexpr bool supports() { return !std::is_same_v<T, bool>; }
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return ipow(a, b);
    } else {
      return std::pow(a, b);
    }
  }
};

Tensor pow_impl(const Tensor& a, const Tensor& b) { return binary_op<PowOp>("pow", a, b, Promotion::NoBool); }

}  // namespace
DFW_REGISTER_BINARY(pow, pow_impl)
}  // namespace dfw
