// sin_out: out = sin(x); out already has x's sizes (the contract checks it).
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/ops/sin.h>

namespace backplane::npu {

void sin_out(const at::Tensor& x, at::Tensor& out) {
  launch(out.device().index(), "backplane::sin_out", [x, out] {
    at::Tensor host_out = host_view(out);
    at::sin_out(host_out, host_view(x));
  });
}

}  // namespace backplane::npu

BACKPLANE_WRITING_KERNEL(PrivateUse1, sin_out, backplane::npu::sin_out)
