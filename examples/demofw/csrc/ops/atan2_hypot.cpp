// demofw.atan2 / demofw.hypot / demofw.logaddexp (floating point only; ints promote).
#include <algorithm>
#include <cmath>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct Atan2Op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T a, T b) const { return std::atan2(a, b); }
};
struct HypotOp {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T a, T b) const { return std::hypot(a, b); }
};
struct LogAddExpOp {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T a, T b) const {
    if (std::isinf(a) && a == b) return a;
    const T m = std::max(a, b);
    return m + std::log1p(std::exp(-std::abs(a - b)));
  }
};

Tensor atan2_impl(const Tensor& a, const Tensor& b) { return binary_op<Atan2Op>("atan2", a, b, Promotion::IntToFloat); }
Tensor hypot_impl(const Tensor& a, const Tensor& b) { return binary_op<HypotOp>("hypot", a, b, Promotion::IntToFloat); }
Tensor logaddexp_impl(const Tensor& a, const Tensor& b) {
  return binary_op<LogAddExpOp>("logaddexp", a, b, Promotion::IntToFloat);
}

}  // namespace
DFW_REGISTER_BINARY(atan2, atan2_impl)
DFW_REGISTER_BINARY(hypot, hypot_impl)
DFW_REGISTER_BINARY(logaddexp, logaddexp_impl)
}  // namespace dfw
