// sin_out: out = sin(x); out already has x's sizes (the contract checks it).
#include "../launch.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <ATen/ops/sin.h>

namespace backplane::npu {

void sin_out(const at::Tensor& x, at::Tensor& out) {
  static const OpContract contract("sin_out");
  contract.check_out({x, out});
  if (out.numel() == 0) return;
  launch(out.device().index(), contract.qualified_name(), [x, out] {
    at::Tensor host_out = host_view(out);
    at::sin_out(host_out, host_view(x));
  });
}

}  // namespace backplane::npu
