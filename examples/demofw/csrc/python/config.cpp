// demofw.__config__.show(): the build description in the format of
// torch.__config__.show() (aten/src/ATen/Version.cpp show_config()).
#include <sstream>
#include <string>

#include "cuda/CUDAHooks.h"
#include "demofw/build_config.h"  // generated at configure time

namespace dfw {

#ifndef DFW_USE_HEAVY_UNIT
namespace heavy {
bool compiled() { return false; }
double checksum() { return 0.0; }
}  // namespace heavy
#endif

static std::string cuda_style_version(int v) {
  // 13020 -> "13.2" (cudaRuntimeGetVersion encoding: 1000 * major + 10 * minor)
  std::ostringstream os;
  os << v / 1000 << "." << (v % 1000) / 10;
  const int patch = v % 10;
  if (patch != 0) os << "." << patch;
  return os.str();
}

std::string show_config() {
  std::ostringstream ss;
  ss << "demofw built with:\n";
#if defined(__GNUC__) && !defined(__clang__)
  ss << "  - GCC " << __GNUC__ << "." << __GNUC_MINOR__ << "\n";
#elif defined(__clang__)
  ss << "  - clang " << __clang_major__ << "." << __clang_minor__ << "\n";
#endif
  ss << "  - C++ Version: " << __cplusplus << "\n";
  if (cuda::compiled_with_cuda()) {
    ss << "  - CUDA Runtime " << cuda_style_version(cuda::runtime_version()) << "\n";
    ss << "  - NVCC architecture flags: " << cuda::nvcc_arch_flags() << "\n";
  }
  if (nccl::compiled_with_nccl()) {
    ss << "  - NCCL " << DFW_NCCL_HEADER_VERSION << " (header)\n";
  }
  ss << "  - Build settings: " << DFW_BUILD_SETTINGS << "\n";
  return ss.str();
}

}  // namespace dfw
