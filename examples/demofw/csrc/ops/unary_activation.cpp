// demofw.sigmoid / relu / gelu / silu / softplus / mish (activation functions).
#include <cmath>
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct sigmoid_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};
Tensor sigmoid_impl(const Tensor& a) { return unary_op<sigmoid_op>("sigmoid", a, Promotion::IntToFloat); }

struct relu_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return x > T(0) ? x : T(0); }
};
Tensor relu_impl(const Tensor& a) { return unary_op<relu_op>("relu", a, Promotion::IntToFloat); }

struct gelu_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440))); }
};
Tensor gelu_impl(const Tensor& a) { return unary_op<gelu_op>("gelu", a, Promotion::IntToFloat); }

struct silu_op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T x) const { return x / (T(1) + std::exp(-x)); }
};
Tensor silu_impl(const Tensor& a) { return unary_op<silu_op>("silu", a, Promotion::IntToFloat); }

struct softplus_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return x > T(20) ? x : std::log1p(std::exp(x)); }
};
Tensor softplus_impl(const Tensor& a) { return unary_op<softplus_op>("softplus", a, Promotion::IntToFloat); }

struct mish_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return x * std::tanh(x > T(20) ? x : std::log1p(std::exp(x))); }
};
Tensor mish_impl(const Tensor& a) { return unary_op<mish_op>("mish", a, Promotion::IntToFloat); }

}  // namespace
DFW_REGISTER_UNARY(sigmoid, sigmoid_impl)
DFW_REGISTER_UNARY(relu, relu_impl)
DFW_REGISTER_UNARY(gelu, gelu_impl)
DFW_REGISTER_UNARY(silu, silu_impl)
DFW_REGISTER_UNARY(softplus, softplus_impl)
DFW_REGISTER_UNARY(mish, mish_impl)
}  // namespace dfw
