// silu_mul_backward: with s = sigmoid(gate), dgate = grad * up * s * (1 + gate * (1 - s))
// and dup = grad * gate * s, both at the broadcast shape of grad, gate and up, in one
// pass (two_output_loop.h: at::vec vectors on unit-stride runs, opmath, rounded once).
#include "../kernel_variants.h"
#include "two_output_loop.h"

#include <ATen/Dispatch.h>

#include <cmath>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

template <typename T>
T exp_of_neg(T x) {
  return std::exp(-x);
}

template <typename T>
Vectorized<T> exp_of_neg(Vectorized<T> x) {
  return x.neg().exp();
}

struct SiluMulGrads {
  // T: an opmath scalar or a Vectorized of them.
  template <typename T>
  void operator()(T grad, T gate, T up, T& dgate, T& dup) const {
    const T one(1);
    const T s = one / (one + exp_of_neg(gate));
    dgate = grad * up * s * (one + gate * (one - s));
    dup = grad * gate * s;
  }
};

}  // namespace

void silu_mul_backward(at::Tensor& dgate, at::Tensor& dup, const at::Tensor& grad, const at::Tensor& gate,
                       const at::Tensor& up) {
  auto iter = two_output_iterator(dgate, dup, grad, gate, up);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dgate.scalar_type(), "backplane_silu_mul_backward",
                                  [&] { two_output_loop<scalar_t>(iter, SiluMulGrads{}); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): compute-bound (an exp per element),
// so it runs faster than the AVX2 build in float32 and bfloat16 (see bench/results/).
BACKPLANE_CPU_KERNEL_AVX512(silu_mul_backward, silu_mul_backward)
