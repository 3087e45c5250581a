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
void scale_loop(at::TensorIteratorBase& iter, double s) {
  using opmath_t = at::opmath_type<scalar_t>;
  const opmath_t k = static_cast<opmath_t>(s);
  const Vectorized<opmath_t> kv(k);
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    at::native::cpu_kernel_vec(
        iter, [k](scalar_t v) -> scalar_t { return v * k; }, [kv](Vectorized<scalar_t> v) { return v * kv; });
  } else {
    at::native::cpu_kernel_vec(
        iter, [k](scalar_t v) -> scalar_t { return static_cast<opmath_t>(v) * k; },
        [kv](Vectorized<scalar_t> v) {
          auto [v0, v1] = at::vec::convert_to_float<scalar_t>(v);
          return at::vec::convert_from_float<scalar_t>(v0 * kv, v1 * kv);
        });
  }
}

}  // namespace

// x *= s through x's own strides: a strided view writes only its own elements.
void scale_(at::Tensor& x, double s) {
  auto iter = at::TensorIteratorConfig().add_output(x).add_const_input(x).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_scale_",
                                  [&] { scale_loop<scalar_t>(iter, s); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): faster than the AVX2 build in float32
// and bfloat16 (see bench/results/).
BACKPLANE_CPU_WRITING_KERNEL_AVX512(scale_, scale_)
