// demofw.floor / ceil / round / trunc / frac (floating point; integral inputs promote).
#include <cmath>
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct floor_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::floor(x); }
};
Tensor floor_impl(const Tensor& a) { return unary_op<floor_op>("floor", a, Promotion::IntToFloat); }

struct ceil_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::ceil(x); }
};
Tensor ceil_impl(const Tensor& a) { return unary_op<ceil_op>("ceil", a, Promotion::IntToFloat); }

struct round_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::nearbyint(x); }
};
Tensor round_impl(const Tensor& a) { return unary_op<round_op>("round", a, Promotion::IntToFloat); }

struct trunc_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return std::trunc(x); }
};
Tensor trunc_impl(const Tensor& a) { return unary_op<trunc_op>("trunc", a, Promotion::IntToFloat); }

struct frac_op {
  template <typename T>
  static constexpr bool supports() { return std::is_floating_point_v<T>; }
  template <typename T>
  T operator()(T x) const { return x - std::trunc(x); }
};
Tensor frac_impl(const Tensor& a) { return unary_op<frac_op>("frac", a, Promotion::IntToFloat); }

}  // namespace
DFW_REGISTER_UNARY(floor, floor_impl)
DFW_REGISTER_UNARY(ceil, ceil_impl)
DFW_REGISTER_UNARY(round, round_impl)
DFW_REGISTER_UNARY(trunc, trunc_impl)
DFW_REGISTER_UNARY(frac, frac_impl)
}  // namespace dfw
