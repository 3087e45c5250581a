// rms_norm: x / sqrt(mean(x^2 over the last dim) + eps) * weight, computed in opmath
// (float for float16/bfloat16, else the dtype itself) and rounded once.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/rsqrt.h>

namespace backplane::npu {

void rms_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, double eps) {
  launch(out.device().index(), "backplane::rms_norm", [x, weight, eps, out] {
    const at::ScalarType opmath = at::toOpMathType(x.scalar_type());
    const at::Tensor xs = host_view(x).to(opmath);
    const at::Tensor inv = at::rsqrt(xs.square().mean(-1, /*keepdim=*/true) + eps);
    host_view(out).copy_(xs * inv * host_view(weight).to(opmath));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, rms_norm, backplane::npu::rms_norm)
