// mul's registration; its kernels are in mul.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void mul(at::TensorBase& out, const at::TensorBase& a, const at::TensorBase& b);
}  // namespace kernels

void mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) { kernels::mul(out, a, b); }

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, mul, backplane::cuda::mul)
