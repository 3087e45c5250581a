// add: a + alpha * b with broadcasting; float16/bfloat16 computed in float and
// rounded once, as the CPU and CUDA backends do.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/add.h>

namespace backplane::npu {

void add(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  launch(out.device().index(), "backplane::add", [a, b, alpha, out] {
    at::Tensor host_out = host_view(out);
    const at::ScalarType opmath = at::toOpMathType(out.scalar_type());
    // aten's CPU add of 16-bit types computes a + alpha * b with alpha rounded to that
    // type, so only alpha == 1 may take it: each element is then float(a) + float(b)
    // rounded once, what the float path computes, without its two float copies and the
    // copy back, which made bfloat16 add slower than aten's op, most at small sizes (see
    // bench/results/).
    if (opmath == out.scalar_type() || alpha.equal(1))
      at::add_out(host_out, host_view(a), host_view(b), alpha);
    else
      host_out.copy_(at::add(host_view(a).to(opmath), host_view(b).to(opmath), alpha));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, add, backplane::npu::add)
