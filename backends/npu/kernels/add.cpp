// add: a + alpha * b with broadcasting; float16/bfloat16 computed in float and
// rounded once, as the CPU and CUDA backends do.
#include "../launch.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <ATen/OpMathType.h>
#include <ATen/ops/add.h>

namespace backplane::npu {

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  static const OpContract contract("add");
  at::Tensor out = contract.new_output({a, b, alpha});
  if (out.numel() == 0) return out;
  launch(out.device().index(), contract.qualified_name(), [a, b, alpha, out] {
    at::Tensor host_out = host_view(out);
    const at::ScalarType opmath = at::toOpMathType(out.scalar_type());
    if (opmath == out.scalar_type())
      at::add_out(host_out, host_view(a), host_view(b), alpha);
    else
      host_out.copy_(at::add(host_view(a).to(opmath), host_view(b).to(opmath), alpha));
  });
  return out;
}

}  // namespace backplane::npu
