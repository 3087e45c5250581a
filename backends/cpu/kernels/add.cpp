#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/native/cpu/Loops.h>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

// a + alpha * b in opmath (float for float16/bfloat16), rounded once, as aten does.
template <typename scalar_t>
void add_loop(at::TensorIteratorBase& iter, const at::Scalar& alpha) {
  using opmath_t = at::opmath_type<scalar_t>;
  const opmath_t k = alpha.to<opmath_t>();
  const Vectorized<opmath_t> kv(k);
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    at::native::cpu_kernel_vec(
        iter, [k](scalar_t x, scalar_t y) -> scalar_t { return x + k * y; },
        [kv](Vectorized<scalar_t> x, Vectorized<scalar_t> y) { return at::vec::fmadd(y, kv, x); });
  } else {
    at::native::cpu_kernel_vec(
        iter,
        [k](scalar_t x, scalar_t y) -> scalar_t { return static_cast<opmath_t>(x) + k * static_cast<opmath_t>(y); },
        [kv](Vectorized<scalar_t> x, Vectorized<scalar_t> y) {
          auto [x0, x1] = at::vec::convert_to_float<scalar_t>(x);
          auto [y0, y1] = at::vec::convert_to_float<scalar_t>(y);
          return at::vec::convert_from_float<scalar_t>(at::vec::fmadd(y0, kv, x0), at::vec::fmadd(y1, kv, x1));
        });
  }
}

}  // namespace

void add(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(a).add_const_input(b).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_add",
                                  [&] { add_loop<scalar_t>(iter, alpha); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

BACKPLANE_CPU_KERNEL(add, add)
