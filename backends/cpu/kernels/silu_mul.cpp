// silu_mul: silu(gate) * up = gate / (1 + exp(-gate)) * up, with broadcasting
// (TensorIterator, so gate and up may be strided views of one [..., 2H] tensor), in
// opmath (float for float16 and bfloat16) and rounded once.
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

template <typename T>
T silu_times(T gate, T up) {
  return gate / (T(1) + std::exp(-gate)) * up;
}

template <typename T>
Vectorized<T> silu_times(Vectorized<T> gate, Vectorized<T> up) {
  return gate / (Vectorized<T>(T(1)) + gate.neg().exp()) * up;
}

template <typename scalar_t>
void silu_mul_loop(at::TensorIteratorBase& iter) {
  using opmath_t = at::opmath_type<scalar_t>;
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    at::native::cpu_kernel_vec(
        iter, [](scalar_t g, scalar_t u) -> scalar_t { return silu_times(g, u); },
        [](Vectorized<scalar_t> g, Vectorized<scalar_t> u) { return silu_times(g, u); });
  } else {
    at::native::cpu_kernel_vec(
        iter,
        [](scalar_t g, scalar_t u) -> scalar_t {
          return silu_times(static_cast<opmath_t>(g), static_cast<opmath_t>(u));
        },
        [](Vectorized<scalar_t> g, Vectorized<scalar_t> u) {
          auto [g0, g1] = at::vec::convert_to_float<scalar_t>(g);
          auto [u0, u1] = at::vec::convert_to_float<scalar_t>(u);
          return at::vec::convert_from_float<scalar_t>(silu_times(g0, u0), silu_times(g1, u1));
        });
  }
}

}  // namespace

void silu_mul(at::Tensor& out, const at::Tensor& gate, const at::Tensor& up) {
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(gate).add_const_input(up).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_silu_mul",
                                  [&] { silu_mul_loop<scalar_t>(iter); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

BACKPLANE_CPU_KERNEL(silu_mul, silu_mul)
