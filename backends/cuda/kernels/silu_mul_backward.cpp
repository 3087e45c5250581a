// silu_mul_backward's registration; its kernels are in silu_mul_backward.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void silu_mul_backward(at::TensorBase& dgate, at::TensorBase& dup, const at::TensorBase& grad,
                       const at::TensorBase& gate, const at::TensorBase& up);
}  // namespace kernels

void silu_mul_backward(at::Tensor& dgate, at::Tensor& dup, const at::Tensor& grad, const at::Tensor& gate,
                       const at::Tensor& up) {
  kernels::silu_mul_backward(dgate, dup, grad, gate, up);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, silu_mul_backward, backplane::cuda::silu_mul_backward)
