// silu_mul_backward: with s = sigmoid(gate), dgate = grad * up * s * (1 + gate * (1 - s))
// and dup = grad * gate * s, both at the broadcast shape of grad, gate and up, in one
// pass (TensorIterator with two outputs), in opmath (float for float16 and bfloat16)
// and rounded once. Scalar loop: correct for every layout, not vectorized.
#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/cpu/Loops.h>

#include <cmath>
#include <tuple>

namespace backplane::cpu::CPU_CAPABILITY {

void silu_mul_backward(at::Tensor& dgate, at::Tensor& dup, const at::Tensor& grad, const at::Tensor& gate,
                       const at::Tensor& up) {
  auto iter = at::TensorIteratorConfig()
                  .add_output(dgate)
                  .add_output(dup)
                  .add_const_input(grad)
                  .add_const_input(gate)
                  .add_const_input(up)
                  .build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dgate.scalar_type(), "backplane_silu_mul_backward", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    at::native::cpu_kernel_multiple_outputs(iter, [](scalar_t g_in, scalar_t gate_in, scalar_t up_in) {
      const opmath_t g = g_in, x = gate_in, u = up_in;
      const opmath_t s = opmath_t(1) / (opmath_t(1) + std::exp(-x));
      return std::tuple<scalar_t, scalar_t>(static_cast<scalar_t>(g * u * s * (opmath_t(1) + x * (opmath_t(1) - s))),
                                            static_cast<scalar_t>(g * x * s));
    });
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

BACKPLANE_CPU_KERNEL(silu_mul_backward, silu_mul_backward)
