#include "core/Tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>

namespace dfw {

size_t element_size(ScalarType t) {
  switch (t) {
#define DFW_SIZE_CASE(ctype, name, fmt) \
  case ScalarType::name:                \
    return sizeof(ctype);
    DFW_FORALL_SCALAR_TYPES(DFW_SIZE_CASE)
#undef DFW_SIZE_CASE
    default:
      throw std::invalid_argument("element_size: undefined dtype");
  }
}

const char* to_string(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::Byte: return "uint8";
    case ScalarType::Char: return "int8";
    case ScalarType::Short: return "int16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::ComplexFloat: return "complex64";
    case ScalarType::ComplexDouble: return "complex128";
    default: return "undefined";
  }
}

const char* buffer_format(ScalarType t) {
  switch (t) {
#define DFW_FMT_CASE(ctype, name, fmt) \
  case ScalarType::name:               \
    return fmt;
    DFW_FORALL_SCALAR_TYPES(DFW_FMT_CASE)
#undef DFW_FMT_CASE
    default:
      throw std::invalid_argument("buffer_format: undefined dtype");
  }
}

bool is_integral(ScalarType t, bool include_bool) {
  switch (t) {
    case ScalarType::Bool: return include_bool;
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long: return true;
    default: return false;
  }
}

bool is_floating_point(ScalarType t) { return t == ScalarType::Float || t == ScalarType::Double; }
bool is_complex(ScalarType t) { return t == ScalarType::ComplexFloat || t == ScalarType::ComplexDouble; }

static int category(ScalarType t) {
  if (t == ScalarType::Bool) return 0;
  if (is_integral(t, false)) return 1;
  if (is_floating_point(t)) return 2;
  return 3;
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  const int ca = category(a), cb = category(b);
  if (ca != cb) {
    ScalarType hi = ca > cb ? a : b;
    ScalarType lo = ca > cb ? b : a;
    if (hi == ScalarType::ComplexFloat && lo == ScalarType::Double) return ScalarType::ComplexDouble;
    return hi;
  }
  if (ca == 1) {
    // uint8 with a signed type needs a wider signed type (as in numpy/torch)
    if (a == ScalarType::Byte || b == ScalarType::Byte) {
      ScalarType other = a == ScalarType::Byte ? b : a;
      return other == ScalarType::Char ? ScalarType::Short : other;
    }
  }
  return static_cast<int8_t>(a) > static_cast<int8_t>(b) ? a : b;
}

ScalarType to_floating(ScalarType t) {
  if (t == ScalarType::Bool || is_integral(t, false)) return ScalarType::Double;
  return t;
}

ScalarType to_value_type(ScalarType t) {
  if (t == ScalarType::ComplexFloat) return ScalarType::Float;
  if (t == ScalarType::ComplexDouble) return ScalarType::Double;
  return t;
}

void throw_unsupported(const char* op, ScalarType t) {
  throw std::invalid_argument(std::string(op) + ": not implemented for dtype " + to_string(t));
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  return strides == contiguous_strides(sizes, itemsize());
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes, size_t itemsize) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = static_cast<int64_t>(itemsize);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return strides;
}

Tensor Tensor::empty(const std::vector<int64_t>& sizes, ScalarType dtype) {
  Tensor t;
  t.dtype = dtype;
  t.sizes = sizes;
  t.strides = contiguous_strides(sizes, element_size(dtype));
  const size_t nbytes = static_cast<size_t>(t.numel()) * element_size(dtype);
  // 64-byte aligned like c10's CPU allocator
  void* p = std::aligned_alloc(64, ((nbytes + 63) / 64) * 64 + 64);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, nbytes);
  t.holder = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data = static_cast<char*>(p);
  return t;
}

std::string Tensor::repr_shape() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << "]";
  return os.str();
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      std::ostringstream os;
      os << "shapes are not broadcastable: dimension " << i << " has sizes " << da << " and " << db;
      throw std::invalid_argument(os.str());
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace dfw
