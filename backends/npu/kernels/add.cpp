// add: a + alpha * b with broadcasting; float16/bfloat16 computed in float and
// rounded once, as the CPU and CUDA backends do.
#include "../launch.h"

#include <backplane/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/add.h>

namespace backplane::npu {

void add(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  launch(out.device().index(), "backplane::add", [a, b, alpha, out] {
    at::Tensor host_out = host_view(out);
    const at::ScalarType opmath = at::toOpMathType(out.scalar_type());
    if (opmath == out.scalar_type())
      at::add_out(host_out, host_view(a), host_view(b), alpha);
    else
      host_out.copy_(at::add(host_view(a).to(opmath), host_view(b).to(opmath), alpha));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, add, backplane::npu::add)
