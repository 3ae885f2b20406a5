// Shared implementation of element-wise ops: promotion, broadcasting, dtype dispatch.
#pragma once

#include <complex>
#include <stdexcept>
#include <type_traits>

#include "core/Loops.h"
#include "core/OpRegistry.h"
#include "core/ScalarType.h"
#include "core/Tensor.h"
#include "core/TensorIterator.h"

namespace dfw {

enum class Promotion {
  Default,        // common dtype of the inputs
  IntToFloat,     // integral/bool inputs compute in float64 (true division, pow, exp, ...)
  NoBool,         // like Default but bool is computed as int64 (arithmetic on bools)
};

inline ScalarType compute_dtype(ScalarType common, Promotion p) {
  switch (p) {
    case Promotion::IntToFloat: return to_floating(common);
    case Promotion::NoBool: return common == ScalarType::Bool ? ScalarType::Long : common;
    default: return common;
  }
}

// Op must provide `template <typename T> auto operator()(T, T) const` and
// `template <typename T> static constexpr bool supports()`.
template <typename Op, typename DISPATCH = void>
Tensor binary_op(const char* name, const Tensor& a, const Tensor& b, Promotion p) {
  const ScalarType dt = compute_dtype(promote_types(a.dtype, b.dtype), p);
  const Tensor a2 = to_dtype(a, dt);
  const Tensor b2 = to_dtype(b, dt);
  const auto shape = broadcast_shapes(a2.sizes, b2.sizes);
  return DFW_DISPATCH_ALL_TYPES(dt, name, [&]() -> Tensor {
    if constexpr (!Op::template supports<scalar_t>()) {
      throw_unsupported(name, dt);
    } else {
      using out_t = decltype(Op{}(scalar_t{}, scalar_t{}));
      Tensor out = Tensor::empty(shape, CppTypeToScalarType<out_t>::value);
      auto iter = TensorIterator<3>::make({&out, &a2, &b2}, shape);
      const Op op{};
      iter.for_each([&](char** data, const int64_t* strides, int64_t n) {
        binary_loop<out_t, scalar_t>(data, strides, n, op);
      });
      return out;
    }
  });
}

template <typename Op>
Tensor unary_op(const char* name, const Tensor& a, Promotion p) {
  const ScalarType dt = compute_dtype(a.dtype, p);
  const Tensor a2 = to_dtype(a, dt);
  return DFW_DISPATCH_ALL_TYPES(dt, name, [&]() -> Tensor {
    if constexpr (!Op::template supports<scalar_t>()) {
      throw_unsupported(name, dt);
    } else {
      using out_t = decltype(Op{}(scalar_t{}));
      Tensor out = Tensor::empty(a2.sizes, CppTypeToScalarType<out_t>::value);
      auto iter = TensorIterator<2>::make({&out, &a2}, a2.sizes);
      const Op op{};
      iter.for_each([&](char** data, const int64_t* strides, int64_t n) {
        unary_loop<out_t, scalar_t>(data, strides, n, op);
      });
      return out;
    }
  });
}

template <typename T>
inline constexpr bool is_real_v = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

}  // namespace dfw
