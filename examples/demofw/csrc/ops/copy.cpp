// Converting, broadcasting copies between any two dtypes (10 x 10 kernels).
#include <complex>
#include <cstring>
#include <stdexcept>

#include "core/ElementwiseOps.h"

namespace dfw {
namespace {

template <typename dst_t, typename src_t>
inline dst_t convert(src_t v) {
  if constexpr (std::is_same_v<dst_t, src_t>) {
    return v;
  } else if constexpr (std::is_same_v<dst_t, bool>) {
    return v != src_t(0);
  } else if constexpr (is_complex_v<dst_t>) {
    if constexpr (is_complex_v<src_t>) {
      return dst_t(static_cast<typename dst_t::value_type>(v.real()), static_cast<typename dst_t::value_type>(v.imag()));
    } else {
      return dst_t(static_cast<typename dst_t::value_type>(v));
    }
  } else if constexpr (is_complex_v<src_t>) {
    return static_cast<dst_t>(v.real());  // discards the imaginary part, like numpy
  } else {
    return static_cast<dst_t>(v);
  }
}

template <typename dst_t>
void copy_from(Tensor& dst, const Tensor& src) {
  DFW_DISPATCH_ALL_TYPES(src.dtype, "copy_", [&]() {
    auto iter = TensorIterator<2>::make({&dst, &src}, dst.sizes);
    iter.for_each([](char** data, const int64_t* s, int64_t n) {
      unary_loop<dst_t, scalar_t>(data, s, n, [](scalar_t v) { return convert<dst_t>(v); });
    });
  });
}

}  // namespace

void copy_(Tensor& dst, const Tensor& src) {
  if (broadcast_shapes(dst.sizes, src.sizes) != dst.sizes) {
    throw std::invalid_argument("copy_: source of shape " + src.repr_shape() + " does not broadcast to " +
                                dst.repr_shape());
  }
  DFW_DISPATCH_ALL_TYPES(dst.dtype, "copy_", [&]() { copy_from<scalar_t>(dst, src); });
}

Tensor to_dtype(const Tensor& self, ScalarType dtype) {
  if (self.dtype == dtype) return self;
  Tensor out = Tensor::empty(self.sizes, dtype);
  copy_(out, self);
  return out;
}

Tensor contiguous(const Tensor& self) {
  if (self.is_contiguous()) return self;
  Tensor out = Tensor::empty(self.sizes, self.dtype);
  copy_(out, self);
  return out;
}

}  // namespace dfw
