// demofw.add: element-wise binary op over all dtypes.
#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

struct Op {
  template <typename T>
  static constexpr bool supports() { return true; }
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a + b); }
};

Tensor add_impl(const Tensor& a, const Tensor& b) { return binary_op<Op>("add", a, b, Promotion::NoBool); }

}  // namespace
DFW_REGISTER_BINARY(add, add_impl)
}  // namespace dfw
