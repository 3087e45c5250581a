#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/native/cpu/Loops.h>

#include <cmath>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

// Vectorized::sin is SLEEF's 1-ULP sine on AVX2/AVX512 (the one aten uses) and
// std::sin lane by lane in the DEFAULT build.
template <typename scalar_t>
void sin_loop(at::TensorIteratorBase& iter) {
  using opmath_t = at::opmath_type<scalar_t>;
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    at::native::cpu_kernel_vec(
        iter, [](scalar_t v) -> scalar_t { return std::sin(v); }, [](Vectorized<scalar_t> v) { return v.sin(); });
  } else {
    at::native::cpu_kernel_vec(
        iter, [](scalar_t v) -> scalar_t { return std::sin(static_cast<opmath_t>(v)); },
        [](Vectorized<scalar_t> v) {
          auto [v0, v1] = at::vec::convert_to_float<scalar_t>(v);
          return at::vec::convert_from_float<scalar_t>(v0.sin(), v1.sin());
        });
  }
}

}  // namespace

void sin_out(const at::Tensor& x, at::Tensor& out) {
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(x).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_sin_out",
                                  [&] { sin_loop<scalar_t>(iter); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): compute-bound, so it runs faster
// than the AVX2 build in float32 and bfloat16 (see bench/results/).
BACKPLANE_CPU_WRITING_KERNEL_AVX512(sin_out, sin_out)
