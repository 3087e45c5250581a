// mul: a * b with broadcasting; float16/bfloat16 computed in float and rounded once,
// as the CPU and CUDA backends do.
#include "../launch.h"

#include <backplane/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/mul.h>

namespace backplane::npu {

void mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  launch(out.device().index(), "backplane::mul", [a, b, out] {
    at::Tensor host_out = host_view(out);
    const at::ScalarType opmath = at::toOpMathType(out.scalar_type());
    if (opmath == out.scalar_type())
      at::mul_out(host_out, host_view(a), host_view(b));
    else
      host_out.copy_(at::mul(host_view(a).to(opmath), host_view(b).to(opmath)));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, mul, backplane::npu::mul)
