// mul_backward: (da, db) = (grad * b, grad * a) with broadcasting, on the stream; float16
// and bfloat16 computed in float and rounded once, as mul does.
#include "device/launch.h"

#include <backplane/plugin/kernel.h>

#include <ATen/ops/mul.h>

namespace backplane::npu {

void mul_backward(at::Tensor& da, at::Tensor& db, const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  launch(da.device().index(), "backplane::mul_backward", [grad, a, b, da, db] {
    at::Tensor host_da = host_view(da), host_db = host_view(db);
    const at::Tensor host_grad = host_view(grad);
    // aten's CPU mul rounds float(x) * float(y) once for float16 and bfloat16 (mul.cpp).
    at::mul_out(host_da, host_grad, host_view(b));
    at::mul_out(host_db, host_grad, host_view(a));
  });
}

}  // namespace backplane::npu

BACKPLANE_KERNEL(PrivateUse1, mul_backward, backplane::npu::mul_backward)
