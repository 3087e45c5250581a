// add's registration; its kernels are in add.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void add(at::TensorBase& out, const at::TensorBase& a, const at::TensorBase& b, const at::Scalar& alpha);
}  // namespace kernels

void add(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  kernels::add(out, a, b, alpha);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, add, backplane::cuda::add)
