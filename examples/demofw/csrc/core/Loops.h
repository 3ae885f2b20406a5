// Inner loops for element-wise kernels: a fixed-width Vec<T, W> abstraction and
// contiguous / scalar-broadcast / strided fast paths (shape of ATen's cpu/Loops.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace dfw {

template <typename T>
constexpr int vec_width() {
  // one 64-byte cache line per vector, at least 2 lanes
  return sizeof(T) >= 32 ? 2 : static_cast<int>(64 / sizeof(T));
}

template <typename T, int W>
struct alignas(sizeof(T) * W <= 64 ? sizeof(T) * W : 64) Vec {
  T v[W];

  static Vec load(const char* p) {
    Vec r;
    std::memcpy(r.v, p, sizeof(T) * W);
    return r;
  }
  static Vec broadcast(T x) {
    Vec r;
    for (int i = 0; i < W; ++i) r.v[i] = x;
    return r;
  }
  void store(char* p) const { std::memcpy(p, v, sizeof(T) * W); }

  template <typename F, size_t... I>
  auto map_impl(const F& f, std::index_sequence<I...>) const {
    using R = decltype(f(v[0]));
    return Vec<R, W>{{f(v[I])...}};
  }
  template <typename F>
  auto map(const F& f) const {
    return map_impl(f, std::make_index_sequence<W>{});
  }

  template <typename F, size_t... I>
  auto zip_impl(const Vec& o, const F& f, std::index_sequence<I...>) const {
    using R = decltype(f(v[0], o.v[0]));
    return Vec<R, W>{{f(v[I], o.v[I])...}};
  }
  template <typename F>
  auto zip(const Vec& o, const F& f) const {
    return zip_impl(o, f, std::make_index_sequence<W>{});
  }
};

// SCALAR: 0 = all operands advance, 1 = input a is a broadcast scalar, 2 = input b is.
template <int SCALAR, typename out_t, typename in_t, typename Op>
inline void vectorized_binary(char* out, const char* a, const char* b, int64_t n, const Op& op) {
  constexpr int W = vec_width<in_t>();
  using VIn = Vec<in_t, W>;
  int64_t i = 0;
  if constexpr (SCALAR == 1) {
    in_t sa;
    std::memcpy(&sa, a, sizeof(in_t));
    const auto va = VIn::broadcast(sa);
    for (; i + W <= n; i += W) {
      va.zip(VIn::load(b + i * sizeof(in_t)), op).store(out + i * sizeof(out_t));
    }
  } else if constexpr (SCALAR == 2) {
    in_t sb;
    std::memcpy(&sb, b, sizeof(in_t));
    const auto vb = VIn::broadcast(sb);
    for (; i + W <= n; i += W) {
      VIn::load(a + i * sizeof(in_t)).zip(vb, op).store(out + i * sizeof(out_t));
    }
  } else {
    for (; i + W <= n; i += W) {
      VIn::load(a + i * sizeof(in_t)).zip(VIn::load(b + i * sizeof(in_t)), op).store(out + i * sizeof(out_t));
    }
  }
  for (; i < n; ++i) {
    in_t x, y;
    std::memcpy(&x, a + (SCALAR == 1 ? 0 : i * sizeof(in_t)), sizeof(in_t));
    std::memcpy(&y, b + (SCALAR == 2 ? 0 : i * sizeof(in_t)), sizeof(in_t));
    const out_t r = op(x, y);
    std::memcpy(out + i * sizeof(out_t), &r, sizeof(out_t));
  }
}

template <typename out_t, typename in_t, typename Op>
inline void binary_loop(char** data, const int64_t* s, int64_t n, const Op& op) {
  constexpr int64_t so = sizeof(out_t), si = sizeof(in_t);
  if (s[0] == so && s[1] == si && s[2] == si) {
    vectorized_binary<0, out_t, in_t>(data[0], data[1], data[2], n, op);
  } else if (s[0] == so && s[1] == 0 && s[2] == si) {
    vectorized_binary<1, out_t, in_t>(data[0], data[1], data[2], n, op);
  } else if (s[0] == so && s[1] == si && s[2] == 0) {
    vectorized_binary<2, out_t, in_t>(data[0], data[1], data[2], n, op);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      in_t x, y;
      std::memcpy(&x, data[1] + i * s[1], sizeof(in_t));
      std::memcpy(&y, data[2] + i * s[2], sizeof(in_t));
      const out_t r = op(x, y);
      std::memcpy(data[0] + i * s[0], &r, sizeof(out_t));
    }
  }
}

template <typename out_t, typename in_t, typename Op>
inline void unary_loop(char** data, const int64_t* s, int64_t n, const Op& op) {
  constexpr int64_t so = sizeof(out_t), si = sizeof(in_t);
  constexpr int W = vec_width<in_t>();
  using VIn = Vec<in_t, W>;
  int64_t i = 0;
  if (s[0] == so && s[1] == si) {
    for (; i + W <= n; i += W) VIn::load(data[1] + i * si).map(op).store(data[0] + i * so);
  }
  for (; i < n; ++i) {
    in_t x;
    std::memcpy(&x, data[1] + i * s[1], sizeof(in_t));
    const out_t r = op(x);
    std::memcpy(data[0] + i * s[0], &r, sizeof(out_t));
  }
}

}  // namespace dfw
