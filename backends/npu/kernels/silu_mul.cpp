// silu_mul: silu(gate) * up with broadcasting, on the stream; float16/bfloat16 computed
// in float and rounded once, as the CPU and CUDA backends do.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/silu.h>

namespace backplane::npu {

void silu_mul(at::Tensor& out, const at::Tensor& gate, const at::Tensor& up) {
  launch(out.device().index(), "backplane::silu_mul", [gate, up, out] {
    const at::ScalarType opmath = at::toOpMathType(out.scalar_type());
    host_view(out).copy_(at::mul(at::silu(host_view(gate).to(opmath)), host_view(up).to(opmath)));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, silu_mul, backplane::npu::silu_mul)
