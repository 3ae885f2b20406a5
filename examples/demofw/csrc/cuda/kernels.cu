// The CUDA kernels of demofw: a grid-stride element-wise add, compiled for every
// architecture in TORCH_CUDA_ARCH_LIST (cuobjdump --list-elf shows one ELF per sm_XY).
#include <cuda_runtime.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dfw {
namespace cuda {

namespace {

template <typename T>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    out[i] = a[i] + b[i];
  }
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::ostringstream os;
    os << "CUDA error in " << what << ": " << cudaGetErrorName(err) << ": " << cudaGetErrorString(err);
    throw std::runtime_error(os.str());
  }
}

}  // namespace

void add_f64(const double* a, const double* b, double* out, int64_t n) {
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(n) * sizeof(double);
  double *da = nullptr, *db = nullptr, *dout = nullptr;
  check(cudaMalloc(&da, bytes), "cudaMalloc");
  check(cudaMalloc(&db, bytes), "cudaMalloc");
  check(cudaMalloc(&dout, bytes), "cudaMalloc");
  try {
    check(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    check(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    const int threads = 256;
    const int64_t want = (n + threads - 1) / threads;
    const int blocks = static_cast<int>(want < 65535 ? want : 65535);
    add_kernel<double><<<blocks, threads>>>(da, db, dout, n);
    check(cudaGetLastError(), "add_kernel launch");
    check(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  } catch (...) {
    (void)cudaFree(da);
    (void)cudaFree(db);
    (void)cudaFree(dout);
    throw;
  }
  (void)cudaFree(da);
  (void)cudaFree(db);
  (void)cudaFree(dout);
}

}  // namespace cuda
}  // namespace dfw
