// Whole-tensor reductions over a contiguous copy of the input, with multi-lane
// cascade accumulation (the numerically careful shape of ATen's cascade_sum).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "core/OpRegistry.h"
#include "core/ScalarType.h"
#include "core/Tensor.h"

namespace dfw {

// Reduce n elements with LANES independent accumulators, folding blocks of BLOCK elements
// into a running total so rounding error grows with log(n) rather than n.
template <int LANES, int64_t BLOCK, typename acc_t, typename scalar_t, typename Combine>
acc_t cascade_reduce(const scalar_t* p, int64_t n, acc_t identity, const Combine& combine) {
  acc_t total = identity;
  for (int64_t start = 0; start < n; start += BLOCK) {
    const int64_t end = start + BLOCK < n ? start + BLOCK : n;
    std::array<acc_t, LANES> lanes;
    lanes.fill(identity);
    int64_t i = start;
    for (; i + LANES <= end; i += LANES) {
      for (int l = 0; l < LANES; ++l) lanes[l] = combine(lanes[l], static_cast<acc_t>(p[i + l]));
    }
    for (; i < end; ++i) lanes[0] = combine(lanes[0], static_cast<acc_t>(p[i]));
    for (int step = LANES / 2; step > 0; step /= 2) {
      for (int l = 0; l < step; ++l) lanes[l] = combine(lanes[l], lanes[l + step]);
    }
    total = combine(total, lanes[0]);
  }
  return total;
}

template <typename T>
Tensor scalar_tensor(T value) {
  Tensor out = Tensor::empty({}, CppTypeToScalarType<T>::value);
  std::memcpy(out.data, &value, sizeof(T));
  return out;
}

inline Tensor flat_contiguous(const Tensor& self, ScalarType dtype) {
  Tensor c = contiguous(to_dtype(self, dtype));
  Tensor flat = c;
  flat.sizes = {c.numel()};
  flat.strides = {static_cast<int64_t>(c.itemsize())};
  return flat;
}

}  // namespace dfw
