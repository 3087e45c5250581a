// softmax_backward's registration; its kernels are in softmax_backward.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void softmax_backward(at::TensorBase& out, const at::TensorBase& grad, const at::TensorBase& y);
}  // namespace kernels

void softmax_backward(at::Tensor& out, const at::Tensor& grad, const at::Tensor& y) {
  kernels::softmax_backward(out, grad, y);
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, softmax_backward, backplane::cuda::softmax_backward)
