// softmax over the last dimension, computed in opmath (float for float16/bfloat16) and
// rounded once. A zero-dimensional x is one row of one element.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/_softmax.h>

namespace backplane::npu {

void softmax(at::Tensor& out, const at::Tensor& x) {
  launch(out.device().index(), "backplane::softmax", [x, out] {
    const at::ScalarType opmath = at::toOpMathType(x.scalar_type());
    host_view(out).copy_(at::_softmax(host_view(x).to(opmath), -1, /*half_to_float=*/false));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, softmax, backplane::npu::softmax)
