// sin_out's registration; its kernels are in sin_out.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void sin_out(const at::TensorBase& x, at::TensorBase& out);
}  // namespace kernels

void sin_out(const at::Tensor& x, at::Tensor& out) { kernels::sin_out(x, out); }

}  // namespace backplane::cuda

BACKPLANE_WRITING_KERNEL(CUDA, sin_out, backplane::cuda::sin_out)
