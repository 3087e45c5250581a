// mul: a * b with broadcasting (TensorIterator), in opmath (float for float16 and
// bfloat16) and rounded once, as aten does.
#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/native/cpu/Loops.h>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

template <typename scalar_t>
void mul_loop(at::TensorIteratorBase& iter) {
  using opmath_t = at::opmath_type<scalar_t>;
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    at::native::cpu_kernel_vec(
        iter, [](scalar_t x, scalar_t y) -> scalar_t { return x * y; },
        [](Vectorized<scalar_t> x, Vectorized<scalar_t> y) { return x * y; });
  } else {
    at::native::cpu_kernel_vec(
        iter,
        [](scalar_t x, scalar_t y) -> scalar_t { return static_cast<opmath_t>(x) * static_cast<opmath_t>(y); },
        [](Vectorized<scalar_t> x, Vectorized<scalar_t> y) {
          auto [x0, x1] = at::vec::convert_to_float<scalar_t>(x);
          auto [y0, y1] = at::vec::convert_to_float<scalar_t>(y);
          return at::vec::convert_from_float<scalar_t>(x0 * y0, x1 * y1);
        });
  }
}

}  // namespace

void mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(a).add_const_input(b).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_mul",
                                  [&] { mul_loop<scalar_t>(iter); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

BACKPLANE_CPU_KERNEL(mul, mul)
