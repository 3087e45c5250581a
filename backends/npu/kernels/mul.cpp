// mul: a * b with broadcasting; float16/bfloat16 computed in float and rounded once,
// as the CPU and CUDA backends do.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/ops/mul.h>

namespace backplane::npu {

void mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  launch(out.device().index(), "backplane::mul", [a, b, out] {
    at::Tensor host_out = host_view(out);
    // aten's CPU mul of float16 or bfloat16 rounds float(a) * float(b) once, on its
    // vectorized and scalar paths alike: what a float copy of each input would give,
    // without the copies, which made bfloat16 mul markedly slower than aten's op (see
    // bench/results/).
    at::mul_out(host_out, host_view(a), host_view(b));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, mul, backplane::npu::mul)
