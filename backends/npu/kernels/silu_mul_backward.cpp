// silu_mul_backward: (dgate, dup) = (grad * up * silu'(gate), grad * silu(gate)) with
// broadcasting, on the stream; float16/bfloat16 computed in float and rounded once.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>

namespace backplane::npu {

void silu_mul_backward(at::Tensor& dgate, at::Tensor& dup, const at::Tensor& grad, const at::Tensor& gate,
                       const at::Tensor& up) {
  launch(dgate.device().index(), "backplane::silu_mul_backward", [grad, gate, up, dgate, dup] {
    const at::ScalarType opmath = at::toOpMathType(dgate.scalar_type());
    const at::Tensor g = host_view(grad).to(opmath), x = host_view(gate).to(opmath), u = host_view(up).to(opmath);
    host_view(dgate).copy_(at::silu_backward(at::mul(g, u), x));
    host_view(dup).copy_(at::mul(g, at::silu(x)));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, silu_mul_backward, backplane::npu::silu_mul_backward)
