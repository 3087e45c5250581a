// scale_: x *= s in place, through x's own strides (a strided view writes only its
// own elements). float16/bfloat16 are computed in float and rounded once: rounding s
// to the tensor's dtype first would turn a scale of 1e6 into inf.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>

namespace backplane::npu {

void scale_(at::Tensor& x, double s) {
  launch(x.device().index(), "backplane::scale_", [x, s] {
    at::Tensor host = host_view(x);
    const at::ScalarType opmath = at::toOpMathType(host.scalar_type());
    if (opmath == host.scalar_type())
      host.mul_(s);
    else
      host.copy_(host.to(opmath).mul_(s));
  });
}

}  // namespace backplane::npu

BACKPLANE_WRITING_KERNEL(PrivateUse1, scale_, backplane::npu::scale_)
