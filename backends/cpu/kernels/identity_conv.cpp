#include "copy_loop.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <ATen/TensorIterator.h>

namespace backplane::cpu::CPU_CAPABILITY {

at::Tensor identity_conv(const at::Tensor& x) {
  static const OpContract contract("identity_conv");
  at::Tensor out = contract.new_output({x});
  if (out.numel() == 0) return out;
  if (x.is_contiguous()) {
    copy_contiguous(out.mutable_data_ptr(), x.const_data_ptr(), x.nbytes());
    return out;
  }
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(x).build();
  copy_loop(iter);
  return out;
}

}  // namespace backplane::cpu::CPU_CAPABILITY
