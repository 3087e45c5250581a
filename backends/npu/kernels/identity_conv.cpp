// identity_conv: a new contiguous tensor equal to x bit for bit (any layout of x).
#include "../launch.h"
#include "ops.h"

#include <backplane/op_contract.h>

namespace backplane::npu {

at::Tensor identity_conv(const at::Tensor& x) {
  static const OpContract contract("identity_conv");
  at::Tensor out = contract.new_output({x});
  if (out.numel() == 0) return out;
  launch(out.device().index(), contract.qualified_name(), [x, out] { host_view(out).copy_(host_view(x)); });
  return out;
}

}  // namespace backplane::npu
