#include "core/OpRegistry.h"

namespace dfw {

std::map<std::string, BinaryFn>& OpRegistry::binary() {
  static std::map<std::string, BinaryFn> m;
  return m;
}
std::map<std::string, UnaryFn>& OpRegistry::unary() {
  static std::map<std::string, UnaryFn> m;
  return m;
}
std::map<std::string, UnaryFn>& OpRegistry::reduction() {
  static std::map<std::string, UnaryFn> m;
  return m;
}
std::vector<std::string> OpRegistry::names() {
  std::vector<std::string> out;
  for (auto& kv : binary()) out.push_back(kv.first);
  for (auto& kv : unary()) out.push_back(kv.first);
  for (auto& kv : reduction()) out.push_back(kv.first);
  return out;
}

}  // namespace dfw
