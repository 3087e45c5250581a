// crop(img, box=[top, left, height, width]): the window must lie inside img's last
// two dimensions; an empty window (height or width 0) is allowed.
#include "define/shape_rules/shape_rules.h"

#include <c10/util/Exception.h>

#include <limits>

namespace backplane {
namespace {

std::vector<c10::SymInt> crop_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& img = args[op.arg_index("img")].toTensor();
  const std::vector<int64_t> box = args[op.arg_index("box")].toIntVector();
  TORCH_CHECK_VALUE(box.size() == 4, "backplane::crop: box must have 4 values [top, left, height, width], found ",
                    box.size());
  TORCH_CHECK_VALUE(img.dim() >= 2, "backplane::crop: img must have at least 2 dimensions (..., H, W), found ",
                    img.dim(), " (sizes ", img.sym_sizes(), ")");
  const int64_t top = box[0], left = box[1], height = box[2], width = box[3];
  TORCH_CHECK_VALUE(top >= 0 && left >= 0 && height >= 0 && width >= 0,
                    "backplane::crop: box values must be >= 0, found [", top, ", ", left, ", ", height, ", ", width, "]");
  // top + height and left + width are computed below; a box near 2^63 would wrap
  // to a negative sum, pass the fit check and read far outside img.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  TORCH_CHECK_VALUE(top <= kMax - height && left <= kMax - width, "backplane::crop: box [", top, ", ", left, ", ",
                    height, ", ", width, "] does not fit img of sizes ", img.sym_sizes(),
                    " (top + height or left + width overflows int64)");
  const c10::SymInt H = img.sym_size(-2), W = img.sym_size(-1);
  const bool fits = H.sym_ge(top + height).expect_true(__FILE__, __LINE__) &&
                    W.sym_ge(left + width).expect_true(__FILE__, __LINE__);
  TORCH_CHECK_VALUE(fits, "backplane::crop: box [", top, ", ", left, ", ", height, ", ", width,
                    "] does not fit img of sizes ", img.sym_sizes(), " (expected top + height <= ", H,
                    " and left + width <= ", W, ")");
  std::vector<c10::SymInt> sizes = img.sym_sizes().vec();
  sizes[sizes.size() - 2] = height;
  sizes[sizes.size() - 1] = width;
  return sizes;
}

}  // namespace

BACKPLANE_SHAPE_RULE(crop, crop_shape);

}  // namespace backplane
