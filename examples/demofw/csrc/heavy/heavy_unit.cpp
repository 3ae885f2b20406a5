// USE_HEAVY_UNIT: one deliberately memory-hungry translation unit.
//
// std::visit over three variants of 12 alternatives instantiates 12^3 = 1728 visitor
// bodies in one function; at -O2 cc1plus peaks around 500 MB for ~10 s (GCC 12, x86_64).
// buildctl uses it to reproduce "the compiler was OOM-killed" under a container memory
// limit (e.g. --memory=384m with MAX_JOBS=1), while every other TU stays under ~350 MB.
// Keep DFW_HEAVY_ALTERNATIVES at 12 unless you re-measure (README.md, "Heavy unit").
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <variant>

#include "cuda/CUDAHooks.h"

#ifndef DFW_HEAVY_ALTERNATIVES
#define DFW_HEAVY_ALTERNATIVES 12
#endif

namespace dfw {
namespace heavy {
namespace {

// A quantity tagged with a compile-time unit exponent.
template <int UNIT>
struct Quantity {
  static constexpr int UNIT_TAG = UNIT;
  double value;
};

template <std::size_t... I>
auto make_variant(std::index_sequence<I...>) -> std::variant<Quantity<static_cast<int>(I)>...>;
using AnyQuantity = decltype(make_variant(std::make_index_sequence<DFW_HEAVY_ALTERNATIVES>{}));

template <std::size_t... I>
AnyQuantity make_quantity(std::size_t unit, double v, std::index_sequence<I...>) {
  AnyQuantity q;
  ((unit == I ? (q = Quantity<static_cast<int>(I)>{v}, 0) : 0), ...);
  return q;
}

double combine(const AnyQuantity& a, const AnyQuantity& b, const AnyQuantity& c) {
  return std::visit(
      [](auto x, auto y, auto z) {
        constexpr int ux = decltype(x)::UNIT_TAG, uy = decltype(y)::UNIT_TAG, uz = decltype(z)::UNIT_TAG;
        return std::sin(x.value * (ux + 1)) * std::cos(y.value * (uy + 1)) + std::sqrt(std::fabs(z.value)) * (uz + 1);
      },
      a, b, c);
}

}  // namespace

bool compiled() { return true; }

// Deterministic checksum over a sweep of unit combinations (exercises the visit table).
double checksum() {
  constexpr std::size_t N = DFW_HEAVY_ALTERNATIVES;
  double acc = 0;
  for (std::size_t i = 0; i < N; ++i) {
    for (std::size_t j = 0; j < N; j += 5) {
      const auto a = make_quantity(i, 0.25 * static_cast<double>(i), std::make_index_sequence<N>{});
      const auto b = make_quantity(j, 0.5, std::make_index_sequence<N>{});
      const auto c = make_quantity((i + j) % N, 2.0, std::make_index_sequence<N>{});
      acc += combine(a, b, c);
    }
  }
  return acc;
}

}  // namespace heavy
}  // namespace dfw
