// demofw.mul: element-wise binary op over all dtypes.
#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct Op {
  template <typename T>
  static constexpr bool supports() { return true; }
  template <typename T>
  T operator()(T a, T b) const { if constexpr (std::is_same_v<T, bool>) { return a && b; } else { return static_cast<T>(a * b); } }
};

Tensor mul_impl(const Tensor& a, const Tensor& b) { return binary_op<Op>("mul", a, b, Promotion::Default); }

}  // namespace
DFW_REGISTER_BINARY(mul, mul_impl)
}  // namespace dfw
