// rms_norm_backward's registration; its kernels are in rms_norm_backward.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void rms_norm_backward(at::TensorBase& dx, at::TensorBase& dweight, const at::TensorBase& grad, const at::TensorBase& x,
                       const at::TensorBase& weight, double eps);
}  // namespace kernels

void rms_norm_backward(at::Tensor& dx, at::Tensor& dweight, const at::Tensor& grad, const at::Tensor& x,
                       const at::Tensor& weight, double eps) {
  kernels::rms_norm_backward(dx, dweight, grad, x, weight, eps);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, rms_norm_backward, backplane::cuda::rms_norm_backward)
