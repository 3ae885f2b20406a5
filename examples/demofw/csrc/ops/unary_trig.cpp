// demofw.sin / cos / tan / tanh / atan / asinh.
#include <cmath>
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct sin_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::sin(x); }
};
Tensor sin_impl(const Tensor& a) { return unary_op<sin_op>("sin", a, Promotion::IntToFloat); }

struct cos_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::cos(x); }
};
Tensor cos_impl(const Tensor& a) { return unary_op<cos_op>("cos", a, Promotion::IntToFloat); }

struct tan_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::tan(x); }
};
Tensor tan_impl(const Tensor& a) { return unary_op<tan_op>("tan", a, Promotion::IntToFloat); }

struct tanh_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::tanh(x); }
};
Tensor tanh_impl(const Tensor& a) { return unary_op<tanh_op>("tanh", a, Promotion::IntToFloat); }

struct atan_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::atan(x); }
};
Tensor atan_impl(const Tensor& a) { return unary_op<atan_op>("atan", a, Promotion::IntToFloat); }

struct asinh_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::asinh(x); }
};
Tensor asinh_impl(const Tensor& a) { return unary_op<asinh_op>("asinh", a, Promotion::IntToFloat); }

}  // namespace
DFW_REGISTER_UNARY(sin, sin_impl)
DFW_REGISTER_UNARY(cos, cos_impl)
DFW_REGISTER_UNARY(tan, tan_impl)
DFW_REGISTER_UNARY(tanh, tanh_impl)
DFW_REGISTER_UNARY(atan, atan_impl)
DFW_REGISTER_UNARY(asinh, asinh_impl)
}  // namespace dfw
