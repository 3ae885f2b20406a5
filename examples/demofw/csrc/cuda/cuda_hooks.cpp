#include "cuda/CUDAHooks.h"

#include "demofw/build_config.h"  // generated: DFW_CUDA_ARCH_NAMES, DFW_NVCC_ARCH_FLAGS

#include <sstream>
#include <stdexcept>

#ifdef DFW_USE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dfw {
namespace cuda {

#ifdef DFW_USE_CUDA
// Defined in kernels.cu.
void add_f64(const double* a, const double* b, double* out, int64_t n);
#endif

bool compiled_with_cuda() {
#ifdef DFW_USE_CUDA
  return true;
#else
  return false;
#endif
}

#ifdef DFW_USE_CUDA
static std::string cuda_error_string(cudaError_t err) {
  std::ostringstream os;
  os << cudaGetErrorName(err) << " (" << static_cast<int>(err) << "): " << cudaGetErrorString(err);
  return os.str();
}
#endif

std::string unavailable_reason() {
#ifdef DFW_USE_CUDA
  int n = 0;
  // The runtime is linked statically: with no libcuda.so.1 this returns
  // cudaErrorInsufficientDriver instead of failing to load the extension.
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error
    return cuda_error_string(err);
  }
  return n > 0 ? "" : "no CUDA device";
#else
  return "demofw was not compiled with CUDA (USE_CUDA=OFF)";
#endif
}

int device_count() {
#ifdef DFW_USE_CUDA
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

int runtime_version() {
#ifdef DFW_USE_CUDA
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return -1;
  return v;
#else
  return -1;
#endif
}

std::vector<std::string> arch_list() {
  std::vector<std::string> out;
  std::istringstream is(DFW_CUDA_ARCH_NAMES);
  std::string item;
  while (is >> item) out.push_back(item);
  return out;
}

std::string nvcc_arch_flags() {
  return DFW_NVCC_ARCH_FLAGS;
}

Tensor add(const Tensor& a, const Tensor& b) {
#ifdef DFW_USE_CUDA
  if (device_count() == 0) throw std::runtime_error("CUDA is not available: " + unavailable_reason());
  const auto shape = broadcast_shapes(a.sizes, b.sizes);
  Tensor a2 = Tensor::empty(shape, ScalarType::Double);
  Tensor b2 = Tensor::empty(shape, ScalarType::Double);
  copy_(a2, a);
  copy_(b2, b);
  Tensor out = Tensor::empty(shape, ScalarType::Double);
  add_f64(a2.data_ptr<double>(), b2.data_ptr<double>(), out.data_ptr<double>(), out.numel());
  return out;
#else
  (void)a;
  (void)b;
  throw std::runtime_error("demofw was not compiled with CUDA (USE_CUDA=OFF)");
#endif
}

}  // namespace cuda
}  // namespace dfw
