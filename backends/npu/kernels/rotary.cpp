// rotary: the pairs (x[..., i], x[..., i + D/2]) rotated by cos/sin[..., i], on the
// stream; float16/bfloat16 computed in float and rounded once, as the CPU and CUDA
// backends do.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>

namespace backplane::npu {

void rotary(at::Tensor& out, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  launch(out.device().index(), "backplane::rotary", [x, cos, sin, out] {
    const at::ScalarType opmath = at::toOpMathType(x.scalar_type());
    const int64_t half = x.size(-1) / 2;
    const at::Tensor xs = host_view(x).to(opmath);
    const at::Tensor x1 = xs.narrow(-1, 0, half), x2 = xs.narrow(-1, half, half);
    const at::Tensor c = host_view(cos).to(opmath), s = host_view(sin).to(opmath);
    const at::Tensor y = host_view(out);
    y.narrow(-1, 0, half).copy_(x1 * c - x2 * s);
    y.narrow(-1, half, half).copy_(x2 * c + x1 * s);
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, rotary, backplane::npu::rotary)
