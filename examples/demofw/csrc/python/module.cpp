// demofw._C: the CPython extension (raw C API, no binding library).
//
// Inputs may be Python scalars, nested lists/tuples, or any object exporting a
// PEP 3118 buffer (numpy arrays, array.array, memoryview). Results come back as a
// Python scalar when every input was a scalar, as a numpy.ndarray when an input was a
// buffer and numpy is importable, and as nested lists otherwise. numpy is therefore
// optional at run time; it is required at build time (find_package(Python ... NumPy)).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <complex>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/OpRegistry.h"
#include "core/Tensor.h"
#include "cuda/CUDAHooks.h"
#include "demofw/build_config.h"

namespace dfw {
namespace {

enum class Kind { Scalar, List, Buffer };

struct Arg {
  Tensor t;
  Kind kind;
};

// ---- Python -> Tensor ---------------------------------------------------------------------

bool parse_buffer_format(const char* fmt, Py_ssize_t itemsize, ScalarType* out) {
  if (fmt == nullptr) fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') ++fmt;  // native / little-endian (x86_64, aarch64)
  const std::string f(fmt);
  if (f == "?") *out = ScalarType::Bool;
  else if (f == "B") *out = ScalarType::Byte;
  else if (f == "b") *out = ScalarType::Char;
  else if (f == "h") *out = ScalarType::Short;
  else if (f == "i") *out = ScalarType::Int;
  else if ((f == "l" || f == "q") && itemsize == 8) *out = ScalarType::Long;
  else if (f == "l" && itemsize == 4) *out = ScalarType::Int;
  else if (f == "f") *out = ScalarType::Float;
  else if (f == "d") *out = ScalarType::Double;
  else if (f == "Zf") *out = ScalarType::ComplexFloat;
  else if (f == "Zd") *out = ScalarType::ComplexDouble;
  else return false;
  return element_size(*out) == static_cast<size_t>(itemsize);
}

struct BufferHolder {
  Py_buffer view;
  ~BufferHolder() { PyBuffer_Release(&view); }  // released while the GIL is held (inside the call)
};

ScalarType scalar_dtype(PyObject* o) {
  if (PyBool_Check(o)) return ScalarType::Bool;
  if (PyLong_Check(o)) return ScalarType::Long;
  if (PyFloat_Check(o)) return ScalarType::Double;
  if (PyComplex_Check(o)) return ScalarType::ComplexDouble;
  return ScalarType::Undefined;
}

void write_scalar(PyObject* o, ScalarType dt, char* dst) {
  switch (dt) {
    case ScalarType::Bool: {
      const bool v = PyObject_IsTrue(o) == 1;
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    case ScalarType::Long: {
      const long long v = PyLong_AsLongLong(o);
      if (v == -1 && PyErr_Occurred()) throw std::overflow_error("integer does not fit in int64");
      const int64_t w = v;
      std::memcpy(dst, &w, sizeof w);
      break;
    }
    case ScalarType::Double: {
      const double v = PyFloat_AsDouble(o);
      if (v == -1.0 && PyErr_Occurred()) throw std::invalid_argument("expected a real number");
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    case ScalarType::ComplexDouble: {
      const Py_complex c = PyComplex_AsCComplex(o);
      if (c.real == -1.0 && PyErr_Occurred()) throw std::invalid_argument("expected a complex number");
      const std::complex<double> v(c.real, c.imag);
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    default:
      throw std::invalid_argument("unsupported element");
  }
}

// Infer shape and dtype of a nested sequence of numbers.
void infer_nested(PyObject* o, size_t depth, std::vector<int64_t>& shape, ScalarType& dt) {
  const ScalarType s = scalar_dtype(o);
  if (s != ScalarType::Undefined) {
    if (depth != shape.size()) throw std::invalid_argument("ragged nested sequence");
    dt = dt == ScalarType::Undefined ? s : promote_types(dt, s);
    return;
  }
  if (!PyList_Check(o) && !PyTuple_Check(o)) {
    throw std::invalid_argument(std::string("expected a number, a (nested) list/tuple of numbers or a buffer, got ") +
                                Py_TYPE(o)->tp_name);
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  if (depth == shape.size()) {
    shape.push_back(n);
  } else if (shape[depth] != n) {
    throw std::invalid_argument("ragged nested sequence");
  }
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; ++i) infer_nested(items[i], depth + 1, shape, dt);
}

void fill_nested(PyObject* o, ScalarType dt, char*& cursor) {
  if (PyList_Check(o) || PyTuple_Check(o)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < n; ++i) fill_nested(items[i], dt, cursor);
    return;
  }
  const ScalarType s = scalar_dtype(o);
  // write as the element's own type, then convert in place when the dtype differs
  if (s == dt) {
    write_scalar(o, dt, cursor);
  } else {
    Tensor tmp = Tensor::empty({}, s);
    write_scalar(o, s, tmp.data);
    Tensor dst;
    dst.dtype = dt;
    dst.data = cursor;
    copy_(dst, tmp);
  }
  cursor += element_size(dt);
}

Arg from_python(PyObject* o) {
  if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      throw std::invalid_argument("could not get a strided buffer from the argument");
    }
    auto holder = std::make_shared<BufferHolder>();
    holder->view = view;
    // From here on the holder owns (and releases) the view.
    ScalarType dt;
    if (!parse_buffer_format(holder->view.format, holder->view.itemsize, &dt)) {
      throw std::invalid_argument(std::string("unsupported buffer format '") +
                                  (holder->view.format ? holder->view.format : "B") + "'");
    }
    Arg a{Tensor{}, Kind::Buffer};
    a.t.dtype = dt;
    a.t.data = static_cast<char*>(holder->view.buf);
    for (int d = 0; d < holder->view.ndim; ++d) {
      a.t.sizes.push_back(holder->view.shape[d]);
      a.t.strides.push_back(holder->view.strides[d]);
    }
    a.t.holder = holder;
    return a;
  }
  const ScalarType s = scalar_dtype(o);
  if (s != ScalarType::Undefined) {
    Arg a{Tensor::empty({}, s), Kind::Scalar};
    write_scalar(o, s, a.t.data);
    return a;
  }
  std::vector<int64_t> shape;
  ScalarType dt = ScalarType::Undefined;
  infer_nested(o, 0, shape, dt);
  if (dt == ScalarType::Undefined) dt = ScalarType::Double;  // empty list
  Arg a{Tensor::empty(shape, dt), Kind::List};
  char* cursor = a.t.data;
  fill_nested(o, dt, cursor);
  return a;
}

// NEP 50 / torch "wrapped number" rule: a Python scalar does not widen an array of the
// same category (int8_array + 1 stays int8); a scalar of a higher category wins.
void apply_scalar_promotion(Arg& a, const Arg& other) {
  if (a.kind != Kind::Scalar || other.kind == Kind::Scalar) return;
  auto category = [](ScalarType t) {
    return t == ScalarType::Bool ? 0 : is_integral(t, false) ? 1 : is_floating_point(t) ? 2 : 3;
  };
  if (category(a.t.dtype) <= category(other.t.dtype)) a.t = to_dtype(a.t, other.t.dtype);
}

// ---- Tensor -> Python ---------------------------------------------------------------------

PyObject* element_to_python(const char* p, ScalarType dt) {
  switch (dt) {
    case ScalarType::Bool: { bool v; std::memcpy(&v, p, sizeof v); return PyBool_FromLong(v); }
    case ScalarType::Byte: { uint8_t v; std::memcpy(&v, p, sizeof v); return PyLong_FromLong(v); }
    case ScalarType::Char: { int8_t v; std::memcpy(&v, p, sizeof v); return PyLong_FromLong(v); }
    case ScalarType::Short: { int16_t v; std::memcpy(&v, p, sizeof v); return PyLong_FromLong(v); }
    case ScalarType::Int: { int32_t v; std::memcpy(&v, p, sizeof v); return PyLong_FromLong(v); }
    case ScalarType::Long: { int64_t v; std::memcpy(&v, p, sizeof v); return PyLong_FromLongLong(v); }
    case ScalarType::Float: { float v; std::memcpy(&v, p, sizeof v); return PyFloat_FromDouble(v); }
    case ScalarType::Double: { double v; std::memcpy(&v, p, sizeof v); return PyFloat_FromDouble(v); }
    case ScalarType::ComplexFloat: {
      std::complex<float> v; std::memcpy(&v, p, sizeof v); return PyComplex_FromDoubles(v.real(), v.imag());
    }
    case ScalarType::ComplexDouble: {
      std::complex<double> v; std::memcpy(&v, p, sizeof v); return PyComplex_FromDoubles(v.real(), v.imag());
    }
    default:
      PyErr_SetString(PyExc_RuntimeError, "undefined dtype");
      return nullptr;
  }
}

PyObject* to_nested_list(const Tensor& t, size_t dim, const char* p) {
  if (dim == t.sizes.size()) return element_to_python(p, t.dtype);
  PyObject* list = PyList_New(t.sizes[dim]);
  if (!list) return nullptr;
  for (int64_t i = 0; i < t.sizes[dim]; ++i) {
    PyObject* item = to_nested_list(t, dim + 1, p + i * t.strides[dim]);
    if (!item) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, i, item);
  }
  return list;
}

int numpy_typenum(ScalarType dt) {
  switch (dt) {
    case ScalarType::Bool: return NPY_BOOL;
    case ScalarType::Byte: return NPY_UINT8;
    case ScalarType::Char: return NPY_INT8;
    case ScalarType::Short: return NPY_INT16;
    case ScalarType::Int: return NPY_INT32;
    case ScalarType::Long: return NPY_INT64;
    case ScalarType::Float: return NPY_FLOAT32;
    case ScalarType::Double: return NPY_FLOAT64;
    case ScalarType::ComplexFloat: return NPY_COMPLEX64;
    case ScalarType::ComplexDouble: return NPY_COMPLEX128;
    default: return -1;
  }
}

// numpy's C API is imported on first use, so `import demofw` works without numpy.
bool numpy_available() {
  static int state = 0;  // 0 unknown, 1 yes, -1 no
  if (state == 0) {
    if (_import_array() < 0) {
      PyErr_Clear();
      state = -1;
    } else {
      state = 1;
    }
  }
  return state == 1;
}

PyObject* to_numpy(const Tensor& t) {
  const Tensor c = contiguous(t);
  std::vector<npy_intp> dims(c.sizes.begin(), c.sizes.end());
  PyObject* arr = PyArray_SimpleNew(static_cast<int>(dims.size()), dims.data(), numpy_typenum(c.dtype));
  if (!arr) return nullptr;
  std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(arr)), c.data,
              static_cast<size_t>(c.numel()) * c.itemsize());
  return PyArray_Return(reinterpret_cast<PyArrayObject*>(arr));
}

PyObject* to_python(const Tensor& t, bool any_buffer, bool all_scalars) {
  if (all_scalars && t.dim() == 0) return element_to_python(t.data, t.dtype);
  if (any_buffer && numpy_available()) return to_numpy(t);
  return to_nested_list(t, 0, t.data);
}

// ---- error translation ----------------------------------------------------------------------

template <typename F>
PyObject* guarded(F&& f) {
  try {
    return f();
  } catch (const std::domain_error& e) {
    const std::string msg = e.what();
    const std::string tag = "ZeroDivisionError: ";
    if (msg.rfind(tag, 0) == 0) {
      PyErr_SetString(PyExc_ZeroDivisionError, msg.substr(tag.size()).c_str());
    } else {
      PyErr_SetString(PyExc_ValueError, msg.c_str());
    }
  } catch (const std::invalid_argument& e) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::overflow_error& e) {
    PyErr_Clear();
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// ---- module functions ---------------------------------------------------------------------

PyObject* py_binary(PyObject*, PyObject* args) {
  const char* name;
  PyObject *pa, *pb;
  if (!PyArg_ParseTuple(args, "sOO", &name, &pa, &pb)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto& ops = OpRegistry::binary();
    auto it = ops.find(name);
    if (it == ops.end()) throw std::invalid_argument(std::string("unknown binary op '") + name + "'");
    Arg a = from_python(pa), b = from_python(pb);
    apply_scalar_promotion(a, b);
    apply_scalar_promotion(b, a);
    Tensor out;
    {
      // kernels touch only raw memory; buffers stay exported (and pinned) meanwhile
      Py_BEGIN_ALLOW_THREADS
      try {
        out = it->second(a.t, b.t);
      } catch (...) {
        Py_BLOCK_THREADS
        throw;
      }
      Py_END_ALLOW_THREADS
    }
    return to_python(out, a.kind == Kind::Buffer || b.kind == Kind::Buffer,
                     a.kind == Kind::Scalar && b.kind == Kind::Scalar);
  });
}

PyObject* call_unary(std::map<std::string, UnaryFn>& ops, const char* what, PyObject* args) {
  const char* name;
  PyObject* pa;
  if (!PyArg_ParseTuple(args, "sO", &name, &pa)) return nullptr;
  return guarded([&]() -> PyObject* {
    auto it = ops.find(name);
    if (it == ops.end()) throw std::invalid_argument(std::string("unknown ") + what + " op '" + name + "'");
    Arg a = from_python(pa);
    Tensor out;
    Py_BEGIN_ALLOW_THREADS
    try {
      out = it->second(a.t);
    } catch (...) {
      Py_BLOCK_THREADS
      throw;
    }
    Py_END_ALLOW_THREADS
    return to_python(out, a.kind == Kind::Buffer, a.kind == Kind::Scalar || out.dim() == 0);
  });
}

PyObject* py_unary(PyObject*, PyObject* args) { return call_unary(OpRegistry::unary(), "unary", args); }
PyObject* py_reduction(PyObject*, PyObject* args) { return call_unary(OpRegistry::reduction(), "reduction", args); }

PyObject* names_list(const std::vector<std::string>& names) {
  PyObject* list = PyList_New(0);
  for (const auto& n : names) {
    PyObject* s = PyUnicode_FromString(n.c_str());
    PyList_Append(list, s);
    Py_DECREF(s);
  }
  return list;
}

PyObject* py_ops(PyObject*, PyObject*) {
  std::vector<std::string> b, u, r;
  for (auto& kv : OpRegistry::binary()) b.push_back(kv.first);
  for (auto& kv : OpRegistry::unary()) u.push_back(kv.first);
  for (auto& kv : OpRegistry::reduction()) r.push_back(kv.first);
  PyObject* d = PyDict_New();
  PyObject* lb = names_list(b);
  PyObject* lu = names_list(u);
  PyObject* lr = names_list(r);
  PyDict_SetItemString(d, "binary", lb);
  PyDict_SetItemString(d, "unary", lu);
  PyDict_SetItemString(d, "reduction", lr);
  Py_DECREF(lb);
  Py_DECREF(lu);
  Py_DECREF(lr);
  return d;
}

PyObject* py_show_config(PyObject*, PyObject*) {
  return guarded([]() { return PyUnicode_FromString(show_config().c_str()); });
}

PyObject* py_cuda_is_available(PyObject*, PyObject*) { return PyBool_FromLong(cuda::device_count() > 0); }
PyObject* py_cuda_device_count(PyObject*, PyObject*) { return PyLong_FromLong(cuda::device_count()); }
PyObject* py_cuda_unavailable_reason(PyObject*, PyObject*) {
  return PyUnicode_FromString(cuda::unavailable_reason().c_str());
}
PyObject* py_cuda_runtime_version(PyObject*, PyObject*) {
  const int v = cuda::runtime_version();
  if (v < 0) Py_RETURN_NONE;
  return PyLong_FromLong(v);
}
PyObject* py_cuda_arch_list(PyObject*, PyObject*) { return names_list(cuda::arch_list()); }
PyObject* py_cuda_arch_flags(PyObject*, PyObject*) {
  // like torch._C._cuda_getArchFlags(): space separated, None when not built with CUDA
  if (!cuda::compiled_with_cuda()) Py_RETURN_NONE;
  std::string s;
  for (const auto& a : cuda::arch_list()) s += (s.empty() ? "" : " ") + a;
  return PyUnicode_FromString(s.c_str());
}
PyObject* py_cuda_add(PyObject*, PyObject* args) {
  PyObject *pa, *pb;
  if (!PyArg_ParseTuple(args, "OO", &pa, &pb)) return nullptr;
  return guarded([&]() -> PyObject* {
    Arg a = from_python(pa), b = from_python(pb);
    Tensor out = cuda::add(a.t, b.t);
    return to_python(out, a.kind == Kind::Buffer || b.kind == Kind::Buffer,
                     a.kind == Kind::Scalar && b.kind == Kind::Scalar);
  });
}

PyObject* py_nccl_version(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* {
    // encoded like torch._C._nccl_version(): (major << 32) | (minor << 16) | patch
    const int code = nccl::runtime_version_code();
    long long major, minor, patch;
    if (code < 20900) {  // NCCL <= 2.8: major * 1000 + minor * 100 + patch
      major = code / 1000;
      minor = (code % 1000) / 100;
      patch = code % 100;
    } else {
      major = code / 10000;
      minor = (code % 10000) / 100;
      patch = code % 100;
    }
    return PyLong_FromLongLong((major << 32) | (minor << 16) | patch);
  });
}
PyObject* py_nccl_version_code(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* { return PyLong_FromLong(nccl::runtime_version_code()); });
}
PyObject* py_nccl_header_version_code(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* { return PyLong_FromLong(nccl::header_version_code()); });
}
PyObject* py_nccl_version_suffix(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* {
    if (!nccl::compiled_with_nccl()) throw std::runtime_error("demofw was not compiled with NCCL (USE_NCCL=OFF)");
    const std::string s = nccl::header_version_suffix();
    return PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  });
}
PyObject* py_heavy_checksum(PyObject*, PyObject*) { return PyFloat_FromDouble(heavy::checksum()); }

PyMethodDef methods[] = {
    {"_binary", py_binary, METH_VARARGS, "_binary(name, a, b): run a registered binary op"},
    {"_unary", py_unary, METH_VARARGS, "_unary(name, a): run a registered element-wise unary op"},
    {"_reduction", py_reduction, METH_VARARGS, "_reduction(name, a): run a whole-tensor op (sum, sort, ...)"},
    {"_ops", py_ops, METH_NOARGS, "registered op names by kind"},
    {"_show_config", py_show_config, METH_NOARGS, "build configuration, torch.__config__.show() format"},
    {"_cuda_isAvailable", py_cuda_is_available, METH_NOARGS, nullptr},
    {"_cuda_getDeviceCount", py_cuda_device_count, METH_NOARGS, nullptr},
    {"_cuda_unavailableReason", py_cuda_unavailable_reason, METH_NOARGS, nullptr},
    {"_cuda_runtimeVersion", py_cuda_runtime_version, METH_NOARGS, nullptr},
    {"_cuda_getArchList", py_cuda_arch_list, METH_NOARGS, nullptr},
    {"_cuda_getArchFlags", py_cuda_arch_flags, METH_NOARGS, nullptr},
    {"_cuda_add", py_cuda_add, METH_VARARGS, "element-wise float64 add on CUDA device 0"},
    {"_nccl_version", py_nccl_version, METH_NOARGS, nullptr},
    {"_nccl_version_code", py_nccl_version_code, METH_NOARGS, nullptr},
    {"_nccl_header_version_code", py_nccl_header_version_code, METH_NOARGS, nullptr},
    {"_nccl_version_suffix", py_nccl_version_suffix, METH_NOARGS, nullptr},
    {"_heavy_checksum", py_heavy_checksum, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "demofw._C", "demofw native core", -1, methods,
                          nullptr, nullptr, nullptr, nullptr};

int add_bool(PyObject* m, const char* name, bool v) {
  PyObject* o = PyBool_FromLong(v);
  return PyModule_AddObject(m, name, o);  // steals o on success
}

}  // namespace
}  // namespace dfw

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&dfw::module_def);
  if (!m) return nullptr;
  bool ok = true;
  ok &= dfw::add_bool(m, "_GLIBCXX_USE_CXX11_ABI", _GLIBCXX_USE_CXX11_ABI != 0) == 0;
  ok &= dfw::add_bool(m, "_has_cuda", dfw::cuda::compiled_with_cuda()) == 0;
  ok &= dfw::add_bool(m, "_has_nccl", dfw::nccl::compiled_with_nccl()) == 0;
  ok &= dfw::add_bool(m, "_has_heavy_unit", dfw::heavy::compiled()) == 0;
  ok &= PyModule_AddStringConstant(m, "_build_type", DFW_BUILD_TYPE) == 0;
  ok &= PyModule_AddStringConstant(m, "_cuda_version", DFW_CUDA_VERSION) == 0;
  if (!ok) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
