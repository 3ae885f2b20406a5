// demofw.take(a, indices): the elements of the flattened `a` at `indices` (as int64; a negative
// index counts from the end), like torch.take, except that on purpose no index is checked against
// a's size: one past the end reads memory that is not a's, the shape of the out-of-bounds crashes
// fuzzers find in PyTorch's kernels. So `demofw.take([1.0], [1 << 50])` reads 2^50 elements past a
// one-element buffer, beyond any mapping on x86-64 and aarch64 (and below the top byte that aarch64
// ignores), and dies with SIGSEGV in take_kernel: the crash `invoke debug` is shown on in CI.
#include "core/Reduce.h"

namespace dfw {
namespace {

template <typename T>
void take_kernel(const T* in, int64_t numel, const int64_t* index, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = index[i] < 0 ? index[i] + numel : index[i];
    out[i] = in[k];  // unchecked, see above
  }
}

Tensor take_impl(const Tensor& a, const Tensor& indices) {
  const Tensor flat = flat_contiguous(a, a.dtype);
  const Tensor index = contiguous(to_dtype(indices, ScalarType::Long));
  return DFW_DISPATCH_ALL_TYPES(a.dtype, "take", [&]() -> Tensor {
    Tensor out = Tensor::empty(index.sizes, a.dtype);
    take_kernel(flat.data_ptr<scalar_t>(), flat.numel(), index.data_ptr<int64_t>(), out.data_ptr<scalar_t>(),
                index.numel());
    return out;
  });
}

}  // namespace
DFW_REGISTER_BINARY(take, take_impl)
}  // namespace dfw
