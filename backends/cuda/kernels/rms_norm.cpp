// rms_norm's registration; its kernels are in rms_norm.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void rms_norm(at::TensorBase& out, const at::TensorBase& x, const at::TensorBase& weight, double eps);
}  // namespace kernels

void rms_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, double eps) {
  kernels::rms_norm(out, x, weight, eps);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, rms_norm, backplane::cuda::rms_norm)
