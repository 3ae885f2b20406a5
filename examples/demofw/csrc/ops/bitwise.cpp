// demofw.bitwise_and/or/xor: integral and bool types only.
#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

enum class Bit { AND, OR, XOR };

template <Bit B>
struct BitwiseOp {
  template <typename T>
  static constexpr bool supports() { return std::is_integral_v<T>; }
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      if constexpr (B == Bit::AND) return a && b;
      if constexpr (B == Bit::OR) return a || b;
      return a != b;
    } else {
      if constexpr (B == Bit::AND) return static_cast<T>(a & b);
      if constexpr (B == Bit::OR) return static_cast<T>(a | b);
      return static_cast<T>(a ^ b);
    }
  }
};

Tensor and_impl(const Tensor& a, const Tensor& b) { return binary_op<BitwiseOp<Bit::AND>>("bitwise_and", a, b, Promotion::Default); }
Tensor or_impl(const Tensor& a, const Tensor& b) { return binary_op<BitwiseOp<Bit::OR>>("bitwise_or", a, b, Promotion::Default); }
Tensor xor_impl(const Tensor& a, const Tensor& b) { return binary_op<BitwiseOp<Bit::XOR>>("bitwise_xor", a, b, Promotion::Default); }

}  // namespace
DFW_REGISTER_BINARY(bitwise_and, and_impl)
DFW_REGISTER_BINARY(bitwise_or, or_impl)
DFW_REGISTER_BINARY(bitwise_xor, xor_impl)
}  // namespace dfw
