// scale_'s registration; its kernels are in scale.cu, which sees only at::TensorBase
// (../CMakeLists.txt: why registration is kept out of the .cu files).
#include <backplane/plugin/kernel.h>

namespace backplane::cuda {
namespace kernels {
void scale_(at::TensorBase& x, double s);
}  // namespace kernels

void scale_(at::Tensor& x, double s) { kernels::scale_(x, s); }

}  // namespace backplane::cuda

BACKPLANE_WRITING_KERNEL(CUDA, scale_, backplane::cuda::scale_)
