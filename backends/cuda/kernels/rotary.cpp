// rotary's registration; its kernels are in rotary.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void rotary(at::TensorBase& out, const at::TensorBase& x, const at::TensorBase& cos, const at::TensorBase& sin);
}  // namespace kernels

void rotary(at::Tensor& out, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  kernels::rotary(out, x, cos, sin);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, rotary, backplane::cuda::rotary)
