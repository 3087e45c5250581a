// identity_conv: a new contiguous tensor equal to x bit for bit. Any layout of x is
// read in place (bitwise_copy); a contiguous x takes the 16-byte vector path.
#include "bitwise_copy.h"
#include "ops.h"

#include <backplane/op_contract.h>

#include <c10/cuda/CUDAGuard.h>

namespace backplane::cuda {

at::Tensor identity_conv(const at::Tensor& x) {
  static const OpContract contract("identity_conv");
  at::Tensor out = contract.new_output({x});
  if (out.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(out.device());
  bitwise_copy(contract.qualified_name(), out, x.const_data_ptr(), x.strides());
  return out;
}

}  // namespace backplane::cuda
