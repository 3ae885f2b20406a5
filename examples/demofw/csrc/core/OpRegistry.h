// Name -> kernel registry filled by static registrars in each op translation unit.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/Tensor.h"

namespace dfw {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using UnaryFn = Tensor (*)(const Tensor&);

struct OpRegistry {
  static std::map<std::string, BinaryFn>& binary();
  static std::map<std::string, UnaryFn>& unary();       // element-wise, same shape out
  static std::map<std::string, UnaryFn>& reduction();   // full reduction or whole-tensor op
  static std::vector<std::string> names();
};

struct BinaryRegistrar {
  BinaryRegistrar(const char* name, BinaryFn fn) { OpRegistry::binary()[name] = fn; }
};
struct UnaryRegistrar {
  UnaryRegistrar(const char* name, UnaryFn fn) { OpRegistry::unary()[name] = fn; }
};
struct ReductionRegistrar {
  ReductionRegistrar(const char* name, UnaryFn fn) { OpRegistry::reduction()[name] = fn; }
};

}  // namespace dfw

#define DFW_REGISTER_BINARY(name, fn) static ::dfw::BinaryRegistrar dfw_binary_registrar_##name(#name, fn);
#define DFW_REGISTER_UNARY(name, fn) static ::dfw::UnaryRegistrar dfw_unary_registrar_##name(#name, fn);
#define DFW_REGISTER_REDUCTION(name, fn) \
  static ::dfw::ReductionRegistrar dfw_reduction_registrar_##name(#name, fn);
