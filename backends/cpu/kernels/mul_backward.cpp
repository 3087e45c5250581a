// mul_backward: (da, db) = (grad * b, grad * a), both at the broadcast shape of grad, a
// and b, in one pass (two_output_loop.h: at::vec vectors on unit-stride runs, opmath,
// rounded once, as aten's mul rounds).
#include "../kernel_variants.h"
#include "two_output_loop.h"

#include <ATen/Dispatch.h>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

struct MulGrads {
  // T: an opmath scalar or a Vectorized of them.
  template <typename T>
  void operator()(T grad, T a, T b, T& da, T& db) const {
    da = grad * b;
    db = grad * a;
  }
};

}  // namespace

void mul_backward(at::Tensor& da, at::Tensor& db, const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  auto iter = two_output_iterator(da, db, grad, a, b);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, da.scalar_type(), "backplane_mul_backward",
                                  [&] { two_output_loop<scalar_t>(iter, MulGrads{}); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX2 build on an AVX512 processor too, as mul (kernel_variants.h): memory-bound.
BACKPLANE_CPU_KERNEL(mul_backward, mul_backward)
