#include "../kernel_variants.h"
#include "opmath_loop.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

// a + alpha * b in opmath (float for float16/bfloat16), rounded once, as aten does.
template <typename scalar_t>
void add_loop(at::TensorIteratorBase& iter, const at::Scalar& alpha) {
  using opmath_t = at::opmath_type<scalar_t>;
  const opmath_t k = alpha.to<opmath_t>();
  const Vectorized<opmath_t> kv(k);
  opmath_binary_loop<scalar_t>(
      iter, [k](opmath_t x, opmath_t y) -> opmath_t { return x + k * y; },
      [kv](Vectorized<opmath_t> x, Vectorized<opmath_t> y) { return at::vec::fmadd(y, kv, x); });
}

}  // namespace

void add(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  // `out` is new (the op contract allocated it): it overlaps no input, so the check is skipped.
  auto iter =
      at::TensorIteratorConfig().set_check_mem_overlap(false).add_output(out).add_const_input(a).add_const_input(b).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_add",
                                  [&] { add_loop<scalar_t>(iter, alpha); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX2 build on an AVX512 processor too, as aten's add (kernel_variants.h): memory-bound, so
// the AVX512 build ran slower (see bench/results/).
BACKPLANE_CPU_KERNEL(add, add)
