// demofw.div: element-wise binary op over all dtypes.
#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct Op {
  template <typename T>
  static constexpr bool supports() { return !std::is_integral_v<T>; }
  template <typename T>
  T operator()(T a, T b) const { return a / b; }
};

Tensor div_impl(const Tensor& a, const Tensor& b) { return binary_op<Op>("div", a, b, Promotion::IntToFloat); }

}  // namespace
DFW_REGISTER_BINARY(div, div_impl)
}  // namespace dfw
