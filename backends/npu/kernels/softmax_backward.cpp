// softmax_backward: y * (grad - sum(grad * y)) over the last dimension, computed in
// opmath (float for float16/bfloat16) and rounded once. A zero-dimensional y is one row
// of one element.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>

namespace backplane::npu {

void softmax_backward(at::Tensor& out, const at::Tensor& grad, const at::Tensor& y) {
  launch(out.device().index(), "backplane::softmax_backward", [grad, y, out] {
    const at::ScalarType opmath = at::toOpMathType(y.scalar_type());
    const at::Tensor g = host_view(grad).to(opmath), ys = host_view(y).to(opmath);
    host_view(out).copy_(ys * (g - (g * ys).sum(-1, /*keepdim=*/true)));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, softmax_backward, backplane::npu::softmax_backward)
