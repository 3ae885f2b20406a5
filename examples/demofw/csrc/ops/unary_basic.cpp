// demofw.neg / abs / square / reciprocal / sign.
#include <cmath>
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct NegOp {
  template <typename T>
  static constexpr bool supports() { return !std::is_same_v<T, bool>; }
  template <typename T>
  T operator()(T a) const { return static_cast<T>(-a); }
};
struct AbsOp {
  template <typename T>
  static constexpr bool supports() { return true; }
  template <typename T>
  auto operator()(T a) const {
    if constexpr (is_complex_v<T>) {
      return std::abs(a);
    } else if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return a;
    } else {
      return static_cast<T>(a < 0 ? -a : a);
    }
  }
};
struct SquareOp {
  template <typename T>
  static constexpr bool supports() { return !std::is_same_v<T, bool>; }
  template <typename T>
  T operator()(T a) const { return static_cast<T>(a * a); }
};
struct ReciprocalOp {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T a) const { return T(1) / a; }
};
struct SignOp {
  template <typename T>
  static constexpr bool supports() { return !is_complex_v<T>; }
  template <typename T>
  T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a;
    } else {
      return static_cast<T>((T(0) < a) - (a < T(0)));
    }
  }
};

Tensor neg_impl(const Tensor& a) { return unary_op<NegOp>("neg", a, Promotion::Default); }
Tensor abs_impl(const Tensor& a) { return unary_op<AbsOp>("abs", a, Promotion::Default); }
Tensor square_impl(const Tensor& a) { return unary_op<SquareOp>("square", a, Promotion::NoBool); }
Tensor reciprocal_impl(const Tensor& a) { return unary_op<ReciprocalOp>("reciprocal", a, Promotion::IntToFloat); }
Tensor sign_impl(const Tensor& a) { return unary_op<SignOp>("sign", a, Promotion::Default); }

}  // namespace
DFW_REGISTER_UNARY(neg, neg_impl)
DFW_REGISTER_UNARY(abs, abs_impl)
DFW_REGISTER_UNARY(square, square_impl)
DFW_REGISTER_UNARY(reciprocal, reciprocal_impl)
DFW_REGISTER_UNARY(sign, sign_impl)
}  // namespace dfw
