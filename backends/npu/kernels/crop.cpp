// crop: the window box = [top, left, height, width] of img's last two dimensions,
// copied into a new contiguous tensor.
#include "../launch.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <array>

namespace backplane::npu {

at::Tensor crop(const at::Tensor& img, at::IntArrayRef box) {
  static const OpContract contract("crop");
  at::Tensor out = contract.new_output({img, box});
  if (out.numel() == 0) return out;
  const std::array<int64_t, 4> b{box[0], box[1], box[2], box[3]};
  launch(out.device().index(), contract.qualified_name(), [img, b, out] {
    host_view(out).copy_(host_view(img).slice(-2, b[0], b[0] + b[2]).slice(-1, b[1], b[1] + b[3]));
  });
  return out;
}

}  // namespace backplane::npu
