// mul_backward's registration; its kernels are in mul_backward.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void mul_backward(at::TensorBase& da, at::TensorBase& db, const at::TensorBase& grad, const at::TensorBase& a,
                  const at::TensorBase& b);
}  // namespace kernels

void mul_backward(at::Tensor& da, at::Tensor& db, const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  kernels::mul_backward(da, db, grad, a, b);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, mul_backward, backplane::cuda::mul_backward)
