// NCCL surface: the version of the header compiled against and of the library
// actually loaded at run time (ncclGetVersion), as torch.cuda.nccl.version() reports.
#include <stdexcept>

#include "cuda/CUDAHooks.h"

#ifdef DFW_USE_NCCL
#include <nccl.h>
#endif

namespace dfw {
namespace nccl {

bool compiled_with_nccl() {
#ifdef DFW_USE_NCCL
  return true;
#else
  return false;
#endif
}

int runtime_version_code() {
#ifdef DFW_USE_NCCL
  int v = 0;
  const ncclResult_t r = ncclGetVersion(&v);
  if (r != ncclSuccess) throw std::runtime_error(std::string("ncclGetVersion failed: ") + ncclGetErrorString(r));
  return v;
#else
  throw std::runtime_error("demofw was not compiled with NCCL (USE_NCCL=OFF)");
#endif
}

int header_version_code() {
#ifdef DFW_USE_NCCL
  return NCCL_VERSION_CODE;
#else
  throw std::runtime_error("demofw was not compiled with NCCL (USE_NCCL=OFF)");
#endif
}

std::string header_version_suffix() {
#if defined(DFW_USE_NCCL) && defined(NCCL_SUFFIX)
  return NCCL_SUFFIX;
#else
  return "";
#endif
}

}  // namespace nccl
}  // namespace dfw
