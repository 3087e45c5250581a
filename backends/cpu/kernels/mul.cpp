// mul: a * b with broadcasting (TensorIterator), in opmath (float for float16 and
// bfloat16) and rounded once, as aten does.
#include "../kernel_variants.h"
#include "opmath_loop.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

template <typename scalar_t>
void mul_loop(at::TensorIteratorBase& iter) {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_binary_loop<scalar_t>(
      iter, [](opmath_t x, opmath_t y) -> opmath_t { return x * y; },
      [](Vectorized<opmath_t> x, Vectorized<opmath_t> y) { return x * y; });
}

}  // namespace

void mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  // `out` is new (the op contract allocated it): it overlaps no input, so the check is skipped.
  auto iter =
      at::TensorIteratorConfig().set_check_mem_overlap(false).add_output(out).add_const_input(a).add_const_input(b).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_mul",
                                  [&] { mul_loop<scalar_t>(iter); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX2 build on an AVX512 processor too, as aten's mul (kernel_variants.h): memory-bound, so
// the AVX512 build ran slower (see bench/results/).
BACKPLANE_CPU_KERNEL(mul, mul)
