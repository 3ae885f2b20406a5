// Broadcasting N-operand iteration with dimension coalescing (a miniature of
// ATen's TensorIterator). Operand 0 is the output.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/Tensor.h"

namespace dfw {

template <int NOPS>
struct TensorIterator {
  std::vector<int64_t> shape;                         // innermost dimension first
  std::array<std::vector<int64_t>, NOPS> strides;     // byte strides, innermost first
  std::array<char*, NOPS> base{};

  static TensorIterator make(const std::array<const Tensor*, NOPS>& ops, const std::vector<int64_t>& out_shape) {
    TensorIterator it;
    const size_t nd = out_shape.size();
    it.shape.assign(out_shape.rbegin(), out_shape.rend());
    for (int k = 0; k < NOPS; ++k) {
      const Tensor& t = *ops[k];
      it.base[k] = t.data;
      it.strides[k].assign(nd, 0);
      const size_t off = nd - t.sizes.size();
      for (size_t d = 0; d < t.sizes.size(); ++d) {
        // broadcast dimensions get stride 0
        const int64_t stride = t.sizes[d] == 1 ? 0 : t.strides[d];
        it.strides[k][nd - 1 - (d + off)] = stride;
      }
    }
    it.coalesce();
    if (it.shape.empty()) {  // 0-d: iterate once over one element
      it.shape.push_back(1);
      for (int k = 0; k < NOPS; ++k) it.strides[k].push_back(0);
    }
    return it;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }

  void coalesce() {
    if (shape.size() <= 1) return;
    size_t prev = 0;
    for (size_t dim = 1; dim < shape.size(); ++dim) {
      bool can = true;
      for (int k = 0; k < NOPS && can; ++k) {
        const int64_t s0 = shape[prev], s1 = shape[dim];
        if (s0 == 1 || s1 == 1) continue;
        can = strides[k][prev] * s0 == strides[k][dim];
      }
      if (can) {
        for (int k = 0; k < NOPS; ++k) {
          if (shape[prev] == 1) strides[k][prev] = strides[k][dim];
        }
        shape[prev] *= shape[dim];
      } else {
        ++prev;
        if (prev != dim) {
          shape[prev] = shape[dim];
          for (int k = 0; k < NOPS; ++k) strides[k][prev] = strides[k][dim];
        }
      }
    }
    shape.resize(prev + 1);
    for (int k = 0; k < NOPS; ++k) strides[k].resize(prev + 1);
  }

  // loop(char** data, const int64_t* inner_strides, int64_t n) is called once per
  // innermost row.
  template <typename Loop>
  void for_each(Loop&& loop) const {
    if (numel() == 0) return;
    const size_t nd = shape.size();
    std::array<int64_t, NOPS> inner{};
    for (int k = 0; k < NOPS; ++k) inner[k] = strides[k][0];
    std::vector<int64_t> counter(nd, 0);
    std::array<char*, NOPS> ptrs = base;
    while (true) {
      loop(ptrs.data(), inner.data(), shape[0]);
      size_t d = 1;
      for (; d < nd; ++d) {
        ++counter[d];
        for (int k = 0; k < NOPS; ++k) ptrs[k] += strides[k][d];
        if (counter[d] < shape[d]) break;
        for (int k = 0; k < NOPS; ++k) ptrs[k] -= strides[k][d] * shape[d];
        counter[d] = 0;
      }
      if (d >= nd) break;
    }
  }
};

}  // namespace dfw
