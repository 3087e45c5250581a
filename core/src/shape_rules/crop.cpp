// crop(img, box=[top, left, height, width]): the window must lie inside img's last
// two dimensions; an empty window (height or width 0) is allowed.
#include "shape_rules.h"

#include <c10/util/Exception.h>

namespace backplane {

std::vector<int64_t> crop_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& img = args[op.arg_index("img")].toTensor();
  const std::vector<int64_t> box = args[op.arg_index("box")].toIntVector();
  TORCH_CHECK_VALUE(box.size() == 4, "backplane::crop: box must have 4 values [top, left, height, width], found ",
                    box.size());
  TORCH_CHECK_VALUE(img.dim() >= 2, "backplane::crop: img must have at least 2 dimensions (..., H, W), found ",
                    img.dim(), " (sizes ", img.sizes(), ")");
  const int64_t top = box[0], left = box[1], height = box[2], width = box[3];
  const int64_t H = img.size(-2), W = img.size(-1);
  TORCH_CHECK_VALUE(top >= 0 && left >= 0 && height >= 0 && width >= 0,
                    "backplane::crop: box values must be >= 0, found [", top, ", ", left, ", ", height, ", ", width, "]");
  TORCH_CHECK_VALUE(top + height <= H && left + width <= W, "backplane::crop: box [", top, ", ", left, ", ", height,
                    ", ", width, "] does not fit img of sizes ", img.sizes(), " (expected top + height <= ", H,
                    " and left + width <= ", W, ")");
  std::vector<int64_t> sizes = img.sizes().vec();
  sizes[sizes.size() - 2] = height;
  sizes[sizes.size() - 1] = width;
  return sizes;
}

}  // namespace backplane
