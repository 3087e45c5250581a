// rms_norm_backward: (dx, dweight) on the stream, computed in opmath (float for
// float16/bfloat16, else the dtype itself) and rounded once; dweight summed over every
// row (zeros when x has none).
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/rsqrt.h>

namespace backplane::npu {

void rms_norm_backward(at::Tensor& dx, at::Tensor& dweight, const at::Tensor& grad, const at::Tensor& x,
                       const at::Tensor& weight, double eps) {
  launch(dx.device().index(), "backplane::rms_norm_backward", [grad, x, weight, eps, dx, dweight] {
    const at::ScalarType opmath = at::toOpMathType(x.scalar_type());
    const at::Tensor xs = host_view(x).to(opmath);
    const at::Tensor gw = host_view(grad).to(opmath) * host_view(weight).to(opmath);
    const at::Tensor rstd = at::rsqrt(xs.square().mean(-1, /*keepdim=*/true) + eps);
    const at::Tensor normed = xs * rstd;
    host_view(dx).copy_(rstd * (gw - normed * (gw * normed).mean(-1, /*keepdim=*/true)));
    const int64_t n = x.size(-1);
    host_view(dweight).copy_((host_view(grad).to(opmath) * normed).reshape({-1, n}).sum(0));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, rms_norm_backward, backplane::npu::rms_norm_backward)
