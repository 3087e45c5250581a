// crop: the window box = [top, left, height, width] of img's last two dimensions,
// copied into a new contiguous tensor. The window is addressed in place through img's
// strides from its first element; no view or intermediate is made.
#include "bitwise_copy.h"

#include <backplane/plugin/kernel.h>

namespace backplane::cuda {

void crop(at::Tensor& out, const at::Tensor& img, at::IntArrayRef box) {
  const int64_t first = box[0] * img.stride(-2) + box[1] * img.stride(-1);
  const auto* window = static_cast<const char*>(img.const_data_ptr()) + first * img.element_size();
  bitwise_copy("backplane::crop", out, window, img.strides());
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, crop, backplane::cuda::crop)
