// crop: the window box = [top, left, height, width] of img's last two dimensions,
// copied into a new contiguous tensor.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <array>

namespace backplane::npu {

void crop(at::Tensor& out, const at::Tensor& img, at::IntArrayRef box) {
  const std::array<int64_t, 4> b{box[0], box[1], box[2], box[3]};
  launch(out.device().index(), "backplane::crop", [img, b, out] {
    host_view(out).copy_(host_view(img).slice(-2, b[0], b[0] + b[2]).slice(-1, b[1], b[1] + b[3]));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, crop, backplane::npu::crop)
