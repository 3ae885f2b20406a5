// Element types, promotion and dtype dispatch (a miniature of c10/core/ScalarType.h
// and ATen/Dispatch.h).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace dfw {

// ctype, enum name, PEP 3118 buffer format character(s)
#define DFW_FORALL_SCALAR_TYPES(_)            \
  _(bool, Bool, "?")                          \
  _(uint8_t, Byte, "B")                       \
  _(int8_t, Char, "b")                        \
  _(int16_t, Short, "h")                      \
  _(int32_t, Int, "i")                        \
  _(int64_t, Long, "q")                       \
  _(float, Float, "f")                        \
  _(double, Double, "d")                      \
  _(std::complex<float>, ComplexFloat, "Zf")  \
  _(std::complex<double>, ComplexDouble, "Zd")

enum class ScalarType : int8_t {
#define DFW_DEFINE_ENUM(ctype, name, fmt) name,
  DFW_FORALL_SCALAR_TYPES(DFW_DEFINE_ENUM)
#undef DFW_DEFINE_ENUM
      Undefined
};

constexpr int kNumScalarTypes = static_cast<int>(ScalarType::Undefined);

template <typename T>
struct CppTypeToScalarType;
#define DFW_SPECIALIZE(ctype, name, fmt)                      \
  template <>                                                 \
  struct CppTypeToScalarType<ctype> {                         \
    static constexpr ScalarType value = ScalarType::name;     \
  };
DFW_FORALL_SCALAR_TYPES(DFW_SPECIALIZE)
#undef DFW_SPECIALIZE

template <typename T>
struct is_complex_t : std::false_type {};
template <typename T>
struct is_complex_t<std::complex<T>> : std::true_type {};
template <typename T>
inline constexpr bool is_complex_v = is_complex_t<T>::value;

template <typename T>
struct value_type_of {
  using type = T;
};
template <typename T>
struct value_type_of<std::complex<T>> {
  using type = T;
};
template <typename T>
using value_type_t = typename value_type_of<T>::type;

// The accumulation type used by reductions (like at::acc_type on CPU).
template <typename T>
struct acc_type {
  using type = std::conditional_t<std::is_same_v<T, bool>, int64_t,
               std::conditional_t<std::is_integral_v<T>, int64_t,
               std::conditional_t<std::is_floating_point_v<T>, double, std::complex<double>>>>;
};
template <typename T>
using acc_type_t = typename acc_type<T>::type;

size_t element_size(ScalarType t);
const char* to_string(ScalarType t);
const char* buffer_format(ScalarType t);
bool is_integral(ScalarType t, bool include_bool);
bool is_floating_point(ScalarType t);
bool is_complex(ScalarType t);
ScalarType promote_types(ScalarType a, ScalarType b);
// float for integral inputs (true division, transcendental functions), identity otherwise
ScalarType to_floating(ScalarType t);
ScalarType to_value_type(ScalarType t);

[[noreturn]] void throw_unsupported(const char* op, ScalarType t);

}  // namespace dfw

// ---- dispatch macros (shape of AT_DISPATCH_*) --------------------------------------------
#define DFW_PRIVATE_CASE(enum_name, ctype, ...) \
  case ::dfw::ScalarType::enum_name: {          \
    using scalar_t = ctype;                     \
    return __VA_ARGS__();                       \
  }

#define DFW_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                  \
  [&] {                                                               \
    switch (TYPE) {                                                   \
      DFW_PRIVATE_CASE(Float, float, __VA_ARGS__)                     \
      DFW_PRIVATE_CASE(Double, double, __VA_ARGS__)                   \
      default:                                                        \
        ::dfw::throw_unsupported(NAME, TYPE);                         \
    }                                                                 \
  }()

#define DFW_DISPATCH_FLOATING_AND_COMPLEX_TYPES(TYPE, NAME, ...)                  \
  [&] {                                                                           \
    switch (TYPE) {                                                               \
      DFW_PRIVATE_CASE(Float, float, __VA_ARGS__)                                 \
      DFW_PRIVATE_CASE(Double, double, __VA_ARGS__)                               \
      DFW_PRIVATE_CASE(ComplexFloat, std::complex<float>, __VA_ARGS__)            \
      DFW_PRIVATE_CASE(ComplexDouble, std::complex<double>, __VA_ARGS__)          \
      default:                                                                    \
        ::dfw::throw_unsupported(NAME, TYPE);                                     \
    }                                                                             \
  }()

#define DFW_DISPATCH_REAL_TYPES(TYPE, NAME, ...)                  \
  [&] {                                                           \
    switch (TYPE) {                                               \
      DFW_PRIVATE_CASE(Byte, uint8_t, __VA_ARGS__)                \
      DFW_PRIVATE_CASE(Char, int8_t, __VA_ARGS__)                 \
      DFW_PRIVATE_CASE(Short, int16_t, __VA_ARGS__)               \
      DFW_PRIVATE_CASE(Int, int32_t, __VA_ARGS__)                 \
      DFW_PRIVATE_CASE(Long, int64_t, __VA_ARGS__)                \
      DFW_PRIVATE_CASE(Float, float, __VA_ARGS__)                 \
      DFW_PRIVATE_CASE(Double, double, __VA_ARGS__)               \
      default:                                                    \
        ::dfw::throw_unsupported(NAME, TYPE);                     \
    }                                                             \
  }()

#define DFW_DISPATCH_REAL_TYPES_AND_BOOL(TYPE, NAME, ...)         \
  [&] {                                                           \
    switch (TYPE) {                                               \
      DFW_PRIVATE_CASE(Bool, bool, __VA_ARGS__)                   \
      DFW_PRIVATE_CASE(Byte, uint8_t, __VA_ARGS__)                \
      DFW_PRIVATE_CASE(Char, int8_t, __VA_ARGS__)                 \
      DFW_PRIVATE_CASE(Short, int16_t, __VA_ARGS__)               \
      DFW_PRIVATE_CASE(Int, int32_t, __VA_ARGS__)                 \
      DFW_PRIVATE_CASE(Long, int64_t, __VA_ARGS__)                \
      DFW_PRIVATE_CASE(Float, float, __VA_ARGS__)                 \
      DFW_PRIVATE_CASE(Double, double, __VA_ARGS__)               \
      default:                                                    \
        ::dfw::throw_unsupported(NAME, TYPE);                     \
    }                                                             \
  }()

#define DFW_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                                   \
  [&] {                                                                           \
    switch (TYPE) {                                                               \
      DFW_PRIVATE_CASE(Bool, bool, __VA_ARGS__)                                   \
      DFW_PRIVATE_CASE(Byte, uint8_t, __VA_ARGS__)                                \
      DFW_PRIVATE_CASE(Char, int8_t, __VA_ARGS__)                                 \
      DFW_PRIVATE_CASE(Short, int16_t, __VA_ARGS__)                               \
      DFW_PRIVATE_CASE(Int, int32_t, __VA_ARGS__)                                 \
      DFW_PRIVATE_CASE(Long, int64_t, __VA_ARGS__)                                \
      DFW_PRIVATE_CASE(Float, float, __VA_ARGS__)                                 \
      DFW_PRIVATE_CASE(Double, double, __VA_ARGS__)                               \
      DFW_PRIVATE_CASE(ComplexFloat, std::complex<float>, __VA_ARGS__)            \
      DFW_PRIVATE_CASE(ComplexDouble, std::complex<double>, __VA_ARGS__)          \
      default:                                                                    \
        ::dfw::throw_unsupported(NAME, TYPE);                                     \
    }                                                                             \
  }()
