// A minimal strided tensor (sizes/strides/dtype over shared storage).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ScalarType.h"

namespace dfw {

struct Tensor {
  ScalarType dtype = ScalarType::Undefined;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in bytes (buffers may have any byte stride)
  char* data = nullptr;
  std::shared_ptr<void> holder;  // keeps the storage (or the exporter's buffer) alive

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  size_t itemsize() const { return element_size(dtype); }
  bool defined() const { return dtype != ScalarType::Undefined; }
  bool is_contiguous() const;

  template <typename T>
  T* data_ptr() const {
    return reinterpret_cast<T*>(data);
  }

  static Tensor empty(const std::vector<int64_t>& sizes, ScalarType dtype);
  std::string repr_shape() const;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes, size_t itemsize);
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// copy.cpp: dtype conversion (returns the input itself when nothing is to be done)
Tensor to_dtype(const Tensor& self, ScalarType dtype);
Tensor contiguous(const Tensor& self);
void copy_(Tensor& dst, const Tensor& src);  // broadcasting, converting copy

}  // namespace dfw
