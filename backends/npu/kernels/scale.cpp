// scale_: x *= s in place, through x's own strides (a strided view writes only its
// own elements).
#include "../launch.h"
#include "ops.h"

#include <backplane/op_contract.h>

namespace backplane::npu {

void scale_(at::Tensor& x, double s) {
  static const OpContract contract("scale_");
  contract.check({x, s});
  if (x.numel() == 0) return;
  launch(x.device().index(), contract.qualified_name(), [x, s] { host_view(x).mul_(s); });
}

}  // namespace backplane::npu
