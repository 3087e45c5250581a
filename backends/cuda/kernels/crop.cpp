// crop: the window box = [top, left, height, width] of img's last two dimensions,
// copied into a new contiguous tensor. The window is addressed in place through img's
// strides from its first element; no view or intermediate is made.
#include "bitwise_copy.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <c10/cuda/CUDAGuard.h>

namespace backplane::cuda {

at::Tensor crop(const at::Tensor& img, at::IntArrayRef box) {
  static const OpContract contract("crop");
  at::Tensor out = contract.new_output({img, box});
  if (out.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(out.device());
  const int64_t first = box[0] * img.stride(-2) + box[1] * img.stride(-1);
  const auto* window = static_cast<const char*>(img.const_data_ptr()) + first * img.element_size();
  bitwise_copy(contract.qualified_name(), out, window, img.strides());
  return out;
}

}  // namespace backplane::cuda
