// rms_norm: x / sqrt(mean(x^2 over the last dim) + eps) * weight, computed in opmath
// (float for float16/bfloat16, else the dtype itself) and rounded once.
#include "../launch.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/rsqrt.h>

namespace backplane::npu {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  static const OpContract contract("rms_norm");
  at::Tensor out = contract.new_output({x, weight, eps});
  if (out.numel() == 0) return out;
  launch(out.device().index(), contract.qualified_name(), [x, weight, eps, out] {
    const at::ScalarType opmath = at::toOpMathType(x.scalar_type());
    const at::Tensor xs = host_view(x).to(opmath);
    const at::Tensor inv = at::rsqrt(xs.square().mean(-1, /*keepdim=*/true) + eps);
    host_view(out).copy_(xs * inv * host_view(weight).to(opmath));
  });
  return out;
}

}  // namespace backplane::npu
