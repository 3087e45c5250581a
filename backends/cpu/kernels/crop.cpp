#include "copy_loop.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <ATen/TensorIterator.h>

namespace backplane::cpu::CPU_CAPABILITY {

// The window is a strided view of img; the copy reads it in place (no intermediate).
at::Tensor crop(const at::Tensor& img, at::IntArrayRef box) {
  static const OpContract contract("crop");
  at::Tensor out = contract.new_output({img, box});
  if (out.numel() == 0) return out;
  const at::Tensor window = img.slice(-2, box[0], box[0] + box[2]).slice(-1, box[1], box[1] + box[3]);
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(window).build();
  copy_loop(iter);
  return out;
}

}  // namespace backplane::cpu::CPU_CAPABILITY
