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

#ifdef DFW_USE_ROCM
static std::string hip_style_version(int v) {
  // hipRuntimeGetVersion() is HIP_VERSION: major * 10000000 + minor * 100000 + patch (5.7.31921)
  std::ostringstream os;
  os << v / 10000000 << "." << (v / 100000) % 100 << "." << v % 100000;
  return os.str();
}
#else
static std::string cuda_style_version(int v) {
  // 13020 -> "13.2" (cudaRuntimeGetVersion encoding: 1000 * major + 10 * minor)
  std::ostringstream os;
  os << v / 1000 << "." << (v % 1000) / 10;
  const int patch = v % 10;
  if (patch != 0) os << "." << patch;
  return os.str();
}
#endif

std::string show_config() {
  std::ostringstream ss;
  ss << "demofw built with:\n";
#if defined(__GNUC__) && !defined(__clang__)
  ss << "  - GCC " << __GNUC__ << "." << __GNUC_MINOR__ << "\n";
#elif defined(__clang__)
  ss << "  - clang " << __clang_major__ << "." << __clang_minor__ << "\n";
#endif
  ss << "  - C++ Version: " << __cplusplus << "\n";
#ifdef DFW_USE_ROCM
  // torch prints "HIP Runtime 5.7.31921" on ROCm builds; the GPU code targets are in Build settings
  // (PYTORCH_ROCM_ARCH) and in demofw.cuda.get_arch_list().
  ss << "  - HIP Runtime " << hip_style_version(cuda::runtime_version()) << "\n";
  if (nccl::compiled_with_nccl()) {
    ss << "  - RCCL: NCCL API " << DFW_NCCL_HEADER_VERSION << " (header)\n";
  }
#else
  if (cuda::compiled_with_cuda()) {
    ss << "  - CUDA Runtime " << cuda_style_version(cuda::runtime_version()) << "\n";
    ss << "  - NVCC architecture flags: " << cuda::nvcc_arch_flags() << "\n";
  }
  if (nccl::compiled_with_nccl()) {
    ss << "  - NCCL " << DFW_NCCL_HEADER_VERSION << " (header)\n";
  }
#endif
  ss << "  - Build settings: " << DFW_BUILD_SETTINGS << "\n";
  return ss.str();
}

}  // namespace dfw
