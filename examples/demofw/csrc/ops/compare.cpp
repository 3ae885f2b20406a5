// demofw.eq/ne/lt/le/gt/ge: comparisons producing bool tensors.
#include <complex>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

enum class Cmp { EQ, NE, LT, LE, GT, GE };

template <Cmp C>
struct CompareOp {
  template <typename T>
  static constexpr bool supports() { return C == Cmp::EQ || C == Cmp::NE || !is_complex_v<T>; }
  template <typename T>
  bool operator()(T a, T b) const {
    if constexpr (C == Cmp::EQ) return a == b;
    if constexpr (C == Cmp::NE) return a != b;
    if constexpr (!is_complex_v<T>) {
      if constexpr (C == Cmp::LT) return a < b;
      if constexpr (C == Cmp::LE) return a <= b;
      if constexpr (C == Cmp::GT) return a > b;
      if constexpr (C == Cmp::GE) return a >= b;
    }
    return false;
  }
};

#define DFW_DEFINE_CMP(name, C)                                                                    \
  Tensor name##_impl(const Tensor& a, const Tensor& b) {                                           \
    return binary_op<CompareOp<Cmp::C>>(#name, a, b, Promotion::Default);                          \
  }
DFW_DEFINE_CMP(eq, EQ)
DFW_DEFINE_CMP(ne, NE)
DFW_DEFINE_CMP(lt, LT)
DFW_DEFINE_CMP(le, LE)
DFW_DEFINE_CMP(gt, GT)
DFW_DEFINE_CMP(ge, GE)
#undef DFW_DEFINE_CMP

}  // namespace
DFW_REGISTER_BINARY(eq, eq_impl)
DFW_REGISTER_BINARY(ne, ne_impl)
DFW_REGISTER_BINARY(lt, lt_impl)
DFW_REGISTER_BINARY(le, le_impl)
DFW_REGISTER_BINARY(gt, gt_impl)
DFW_REGISTER_BINARY(ge, ge_impl)
}  // namespace dfw
