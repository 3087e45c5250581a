// identity_conv: a new contiguous tensor equal to x bit for bit (any layout of x).
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

namespace backplane::npu {

void identity_conv(at::Tensor& out, const at::Tensor& x) {
  launch(out.device().index(), "backplane::identity_conv", [x, out] { host_view(out).copy_(host_view(x)); });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, identity_conv, backplane::npu::identity_conv)
