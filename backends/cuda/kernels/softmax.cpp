// softmax's registration; its kernels are in softmax.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void softmax(at::TensorBase& out, const at::TensorBase& x);
}  // namespace kernels

void softmax(at::Tensor& out, const at::Tensor& x) { kernels::softmax(out, x); }

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, softmax, backplane::cuda::softmax)
