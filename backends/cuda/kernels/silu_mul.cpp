// silu_mul's registration; its kernels are in silu_mul.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void silu_mul(at::TensorBase& out, const at::TensorBase& gate, const at::TensorBase& up);
}  // namespace kernels

void silu_mul(at::Tensor& out, const at::Tensor& gate, const at::Tensor& up) { kernels::silu_mul(out, gate, up); }

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, silu_mul, backplane::cuda::silu_mul)
