// CUDA runtime surface of demofw. cuda_hooks.cpp is compiled in every build; without
// USE_CUDA it answers "not compiled with CUDA" (like at::detail::getCUDAHooks()).
#pragma once

#include <string>
#include <vector>

#include "core/Tensor.h"

namespace dfw {
namespace cuda {

bool compiled_with_cuda();
// Number of visible devices; 0 (never an exception) without a driver or device.
int device_count();
// Why device_count() is 0, or "" when it is not.
std::string unavailable_reason();
// cudaRuntimeGetVersion() of the runtime linked in (statically), e.g. 13020; -1 without CUDA.
int runtime_version();
// e.g. {"sm_80", "sm_90", "compute_90"} from TORCH_CUDA_ARCH_LIST at configure time.
std::vector<std::string> arch_list();
// e.g. "-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_90,code=sm_90"
std::string nvcc_arch_flags();
// Element-wise a + b computed by a CUDA kernel on device 0 (float64).
Tensor add(const Tensor& a, const Tensor& b);

}  // namespace cuda

namespace nccl {
bool compiled_with_nccl();
// ncclGetVersion() of the libnccl loaded at run time, e.g. 22809.
int runtime_version_code();
// NCCL_VERSION_CODE of the nccl.h compiled against.
int header_version_code();
std::string header_version_suffix();
}  // namespace nccl

namespace heavy {
bool compiled();
double checksum();
}  // namespace heavy

std::string show_config();

}  // namespace dfw
