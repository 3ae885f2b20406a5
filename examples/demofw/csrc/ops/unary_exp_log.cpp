// demofw.exp / log / log1p / expm1 / log2 / sqrt (integral inputs promote to float64).
#include <cmath>
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct exp_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::exp(x); }
};
Tensor exp_impl(const Tensor& a) { return unary_op<exp_op>("exp", a, Promotion::IntToFloat); }

struct log_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::log(x); }
};
Tensor log_impl(const Tensor& a) { return unary_op<log_op>("log", a, Promotion::IntToFloat); }

struct log1p_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::log1p(x); }
};
Tensor log1p_impl(const Tensor& a) { return unary_op<log1p_op>("log1p", a, Promotion::IntToFloat); }

struct expm1_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::expm1(x); }
};
Tensor expm1_impl(const Tensor& a) { return unary_op<expm1_op>("expm1", a, Promotion::IntToFloat); }

struct log2_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::log2(x); }
};
Tensor log2_impl(const Tensor& a) { return unary_op<log2_op>("log2", a, Promotion::IntToFloat); }

struct sqrt_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::sqrt(x); }
};
Tensor sqrt_impl(const Tensor& a) { return unary_op<sqrt_op>("sqrt", a, Promotion::IntToFloat); }

}  // namespace
DFW_REGISTER_UNARY(exp, exp_impl)
DFW_REGISTER_UNARY(log, log_impl)
DFW_REGISTER_UNARY(log1p, log1p_impl)
DFW_REGISTER_UNARY(expm1, expm1_impl)
DFW_REGISTER_UNARY(log2, log2_impl)
DFW_REGISTER_UNARY(sqrt, sqrt_impl)
}  // namespace dfw
